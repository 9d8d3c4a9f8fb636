"""Analysis while a training job runs, and the actions its findings take (issue 36)."""
