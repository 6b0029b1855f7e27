"""The training engine: one run's loop, optimizers, schedules, evaluation and checkpoints (``train``), its steps
(``steps``), augmentation (``augment``), several seeds as one vectorised job (``ensemble``), and several runs at
once on one GPU, each on its own CUDA stream (``concurrent``). It takes a run's config (``runs.spec``) and knows
nothing of chapters, profiles or the plan."""
