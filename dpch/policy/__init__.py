"""Privacy policy: who the privacy unit is, what each column may reveal, and how much.

A table's policy comes from ``dp:`` annotations in its ClickHouse table and column COMMENTs
(:mod:`.annotations`), overridden key by key by an optional TOML file (:mod:`.toml_file`).
:mod:`.model` holds the validated result; :mod:`.resolve` builds it from the database.
"""

from dpch.policy.model import ColumnPolicy, TablePolicy
from dpch.policy.resolve import Policy

__all__ = ["ColumnPolicy", "Policy", "TablePolicy"]
