"""Sessions as artefacts: fork, export and search.

- :mod:`~jupyter_agent.artefacts.fork`: a new session that starts as a copy of another,
  whole or cut after a user turn;
- :mod:`~jupyter_agent.artefacts.export`: a session as a notebook (``ipynb``), a
  readable transcript (``md``) or its one-file record (``json``);
- :mod:`~jupyter_agent.artefacts.search`: sessions found by title, summary and first
  prompt (the listing index), or by their whole transcripts.

Everything here works on the store protocol (:class:`~jupyter_agent.store.Store`) and
only reads sessions it does not create: no lease is taken on them. The controller, the
magics, the sessions panel and the ``jupyter agent`` command call these functions.
Importing this package imports none of its modules.
"""
