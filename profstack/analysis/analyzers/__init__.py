"""Stateless analyzers, one per section of a rank summary (``summary.RankSummary``).

Each is a function of one rank's compact data (a :class:`~profstack.analysis.analyzers.view.RankView`:
the parsed columns, the GPU accumulator and the analysed window) and, where a threshold matters, the typed
:class:`~profstack.analysis.options.RuleThresholds`. ``metrics.analyze_rank`` composes them:

=====================  ==========================================  ===========================
module                 computes                                    summary keys
=====================  ==========================================  ===========================
view                   the analysed window (steps, GPU, wall)      window
time_breakdown         GPU span split, idle causes, activity mix   temporal_breakdown,
                                                                   idle_breakdown, kernel_types,
                                                                   gpu_activity
kernels                per-kernel tables, precision, occupancy     top_kernels_by_*,
                                                                   distinct_kernels, precision,
                                                                   occupancy
launch_delay           launch -> kernel start delay                launch_delay
synchronisation        host / GPU synchronisation                  sync
memory_ops             memcpy by direction, memset                 memory_ops
steps                  ProfilerStep statistics, outliers           steps
data_loading           DataLoader share of step time               dataloader
annotations            record_function annotations (CPU / GPU)     annotations
communication          communication kernels, overlap              communication
rank_info              device, distributed, counts, top CPU ops    device, distributed, counts,
                                                                   top_cpu_ops
activity               GPU busy / CPU side per time bin (1.2)      timeline
memory                 profile_memory events per device (1.2)      memory
cuda_graphs            launches running several GPU ops (1.2)      cuda_graphs
=====================  ==========================================  ===========================
"""
