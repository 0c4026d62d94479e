//! `#[csd_sdk::task]`: turns `fn name(ctx: Context) -> Result<()>` into a task entry point.
//!
//! Written without `syn`/`quote`: the macro only needs the function's name, and task crates
//! build faster without a full Rust parser in their dependency tree.

use proc_macro::{TokenStream, TokenTree};

/// Marks the task's entry function. It keeps its name and body; the macro adds the exported
/// `run: () -> i32` the runtime calls, which installs the panic hook and maps `Err` to a
/// failure the host reports.
#[proc_macro_attribute]
pub fn task(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        return compile_error("#[csd_sdk::task] takes no arguments");
    }
    let mut tokens = item.clone().into_iter();
    let mut name = None;
    while let Some(t) = tokens.next() {
        if matches!(&t, TokenTree::Ident(i) if i.to_string() == "fn") {
            if let Some(TokenTree::Ident(n)) = tokens.next() {
                name = Some(n.to_string());
            }
            break;
        }
    }
    let Some(name) = name else {
        return compile_error(
            "#[csd_sdk::task] goes on a function: fn run(ctx: Context) -> Result<()>",
        );
    };
    let entry: TokenStream = format!(
        "#[doc(hidden)] mod __csd_task_entry {{ \
            #[no_mangle] pub extern \"C\" fn run() -> i32 {{ ::csd_sdk::__run(super::{name}) }} \
        }}"
    )
    .parse()
    .expect("generated entry point parses");
    let mut out = item;
    out.extend(entry);
    out
}

fn compile_error(msg: &str) -> TokenStream {
    format!("compile_error!({msg:?});")
        .parse()
        .expect("compile_error parses")
}
