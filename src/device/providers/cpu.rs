//! The CPU provider: always there, the last resort of every request.

use ort::ep::CPU;

use super::{every_type, GraphPlan, Optimise, ProviderInfo};
use crate::device::Provider;

pub(super) static INFO: ProviderInfo = ProviderInfo {
    provider: Provider::Cpu,
    short: "cpu",
    ort_name: "CPUExecutionProvider",
    code: 0,
    about: "the CPU",
    needs: "nothing",
    gpu: false,
    memory: None,
    graph: GraphPlan {
        optimise: Optimise::Requested,
        readable_weights: false,
        fused_attention: true,
        cpu_rewrites: true,
    },
    dispatch: |_| CPU::default().build(),
    available: || Ok(true),
    computes_on_device: every_type,
};
