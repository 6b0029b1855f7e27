"""A training run: its identity (``spec``: ``RunSpec``, ``run_config``), the profiles it is trained under
(``profiles``), which runs the book asks for and what each keeps (``asked``), how it is read or made (``make``:
``run``, ``trained_model``), whether a stored one still answers (``policy``) and the behavioural probe that decides
it where the code changed (``probe``)."""
