"""The ``dpch`` command line: query, explain, budget, policy, load, demo, shell.

:mod:`.main` defines the click commands; :mod:`.output` renders releases as a table, JSON or
CSV; :mod:`.load` imports CSV/Parquet files with annotations; :mod:`.demo` runs the demo;
:mod:`.shell` is the interactive loop.
"""
