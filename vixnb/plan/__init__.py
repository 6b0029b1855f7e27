"""The plan and the batch: every result the book needs with its status and GPU minutes (``plan``, ``entries``,
``estimates``), the batch that makes them (``batch``: ``jobs``, ``groups`` of small runs sharing one GPU,
``stopping``) and its dress rehearsal on a CPU (``rehearsal``)."""
