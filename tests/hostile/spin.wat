(module
  (memory (export "memory") 1)
  (func (export "run") (result i32)
    (loop $x (br $x))
    (i32.const 0)))
