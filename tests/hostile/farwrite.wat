(module
  (import "csd_v1" "file_write" (func $w (param i32 i64 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "hello")
  (func (export "run") (result i32)
    (drop (call $w (i32.const 0) (i64.const 500000000000) (i32.const 0) (i32.const 5)))
    (i32.const 0)))
