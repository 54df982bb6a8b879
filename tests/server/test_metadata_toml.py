"""A gateway whose policy comes from a TOML file shows the annotations in force in SHOW CREATE TABLE
(and system.tables, system.columns), not the COMMENTs the file overrides."""

from __future__ import annotations

import base64
import http.client
import json


def test_a_toml_policy_is_what_show_create_table_shows(serve, tmp_path, small_visits):
    toml = tmp_path / "policy.toml"
    toml.write_text('[tables.visits.columns]\nspend = { bounds = [0, 123] }\n')
    srv = serve(policy=str(toml))
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    auth = "Basic " + base64.b64encode(b"ana:ana-pw").decode()
    conn.request("POST", "/", body=b"SHOW CREATE TABLE visits FORMAT JSONEachRow", headers={"Authorization": auth})
    response = conn.getresponse()
    body = response.read().decode()
    assert response.status == 200, body
    ddl = json.loads(body.splitlines()[0])["statement"]
    assert "dp: bounds=[0, 123]" in ddl and "dp: bounds=[0, 500]" not in ddl  # the file's bound, in force
    assert "privacy_unit=user_id" in ddl and 'values=["north", "south", "east", "west"]' in ddl
