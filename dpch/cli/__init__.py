"""The ``dpch`` command line: query, explain, budget, policy, load, demo, shell, serve, audit.

:mod:`.main` defines the click commands and registers those defined in their own modules
(:mod:`.audit`, :mod:`.serve`); :mod:`.context` holds what they all share (the global options, the
sessions they open, error handling), so none of them imports :mod:`.main`; :mod:`.global_options`
lets those options follow the command too. :mod:`.output` renders releases as a table, JSON or CSV,
and :mod:`.ch_formats` in clickhouse-client's formats; :mod:`.statements` reads ``dpch query``'s SQL
and runs ``--multiquery``; :mod:`.progress` draws progress bars; :mod:`.load` imports CSV/Parquet
files with annotations;
:mod:`.demo` runs the demo; :mod:`.shell` is the interactive loop over any
:class:`dpch.api.PrivateSession`.
"""
