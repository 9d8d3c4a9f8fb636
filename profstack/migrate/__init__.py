"""Migration tools off SageMaker Profiler: rewrite smprof scripts, audit legacy Profiler resources."""
