"""The one-query path as stages (docs/design.md "Data flow"), each a module with a typed input
and output and no callbacks into the session:

plan → calibrate → check → admit → execute → release → postprocess → report

:class:`dpch.session.Session` runs them in order; accuracy-first, the audit and the gateway
call the same public stage functions.
"""
