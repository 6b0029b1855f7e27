"""The book: ``execute`` runs the study's notebooks with papermill (their parameters checked first), ``build``
builds the Jupyter Book of the executed chapters (``vixnb run``, ``vixnb book``), and ``links`` is the book's
Sphinx extension (launch links to the committed notebooks). Importing the package imports none of them:
``execute`` stays light of the page pieces, which ``build`` imports."""
