"""Where a converted training job writes its traces: the names the script codemod (smprof.py) and the launcher
codemod (launcher.py) must agree on, in a module of their own so neither imports the other."""

from __future__ import annotations

#: SageMaker uploads this folder to the job's TensorBoardOutputConfig.S3OutputPath
TENSORBOARD_DIR = "/opt/ml/output/tensorboard"
#: the environment variable a converted script reads its trace folder from (default: TENSORBOARD_DIR)
TRACE_DIR_ENV = "PROFSTACK_TRACE_DIR"
