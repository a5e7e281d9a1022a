// RUN: sl-opt %s -split-input-file -verify-diagnostics --sl-convert-precision=precision=f16

// expected-error @+1 {{sl-convert-precision: precision must be f32 or bf16, got 'f16'}}
module {
  func.func @f() {
    return
  }
}
