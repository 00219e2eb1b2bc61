//! The Cranelift JIT: compile a loop-IR function to native code and run it
//! on runtime tensors. `call.rs` holds every `unsafe` line of the crate.

mod call;
mod translate;

pub use call::{run_kernel, RunError};

use crate::ir::{ArrayRef, Function, ParamRef};
use cranelift_codegen::ir::{types, AbiParam, UserFuncName};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module};
use std::time::{Duration, Instant};

/// A kernel compiled to native code, with the array and parameter order its
/// argument block expects.
pub struct CompiledKernel {
    pub name: String,
    pub arrays: Vec<(ArrayRef, bool)>,
    pub params: Vec<ParamRef>,
    pub compile_time: Duration,
    code: call::Code,
}

impl std::fmt::Debug for CompiledKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CompiledKernel({})", self.name)
    }
}

/// Compile `f` with Cranelift at `opt_level=speed` for the host CPU.
pub fn compile(f: &Function) -> Result<CompiledKernel, String> {
    let start = Instant::now();
    let mut flags = settings::builder();
    let set = |flags: &mut settings::Builder, k: &str, v: &str| flags.set(k, v).map_err(|e| format!("cranelift setting {k}: {e}"));
    set(&mut flags, "opt_level", "speed")?;
    set(&mut flags, "use_colocated_libcalls", "false")?;
    set(&mut flags, "is_pic", "false")?;
    let isa_builder = cranelift_native::builder().map_err(|e| format!("host ISA: {e}"))?;
    let isa = isa_builder.finish(settings::Flags::new(flags)).map_err(|e| format!("host ISA: {e}"))?;
    let mut module = JITModule::new(JITBuilder::with_isa(isa, cranelift_module::default_libcall_names()));
    let ptr_ty = module.target_config().pointer_type();
    let mut ctx: Context = module.make_context();
    ctx.func.signature.params.push(AbiParam::new(ptr_ty));
    ctx.func.signature.returns.push(AbiParam::new(types::I64));
    ctx.func.name = UserFuncName::testcase(f.name.as_bytes());
    let arrays = f.arrays();
    let params = f.params();
    let mut fctx = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        translate::Translator::translate(&mut b, f, ptr_ty, &arrays, &params)?;
        b.finalize(module.target_config());
    }
    let id = module.declare_function(&f.name, Linkage::Local, &ctx.func.signature).map_err(|e| format!("declare: {e}"))?;
    module.define_function(id, &mut ctx).map_err(|e| format!("cranelift: {e:?}"))?;
    module.clear_context(&mut ctx);
    module.finalize_definitions().map_err(|e| format!("finalize: {e}"))?;
    let ptr = module.get_finalized_function(id);
    let code = call::Code::new(module, ptr);
    Ok(CompiledKernel { name: f.name.clone(), arrays, params, compile_time: start.elapsed(), code })
}
