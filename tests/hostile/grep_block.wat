(module
  (import "csd_v1" "accel_grep" (func $g (param i32 i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 0) "x")
  (func (export "run") (result i32)
    (drop (call $g (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 64) (i32.const 4)))
    (i32.const 0)))
