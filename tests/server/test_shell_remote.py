"""``dpch shell`` over a remote session (``dpch://``): the same commands through a gateway."""

from __future__ import annotations

import re

import dpch
from dpch.cli.shell import Shell


def test_shell_commands_through_a_gateway(serve, database, capsys):
    srv = serve()
    session = dpch.connect(f"dpch://127.0.0.1:{srv.port}/{database}", analyst="ana", password="ana-pw")
    try:
        shell = Shell(session)
        assert shell.runner.local is False  # the gateway charges: Ctrl-C cannot promise "nothing spent"
        script = ("\\tables\n\\policy visits\n\\explain SELECT count(*) FROM visits\n"
                  "SELECT count(*) FROM visits;\n\\budget\n\\history\n")
        assert shell.run_script(script) == 0
        out = capsys.readouterr().out
        assert "visits  private (unit user_id)" in out and "columns: user_id" in out
        assert "privacy unit: user_id" in out and "cost: ε 0.5" in out
        assert "cost ε 0.5 (laplace" in out and "budget: ε 0.5 of 3 spent" in out
        assert re.search(r"laplace +ε 0\.5 +charged +SELECT count\(\*\) FROM visits$", out, re.MULTILINE)
        # the confirmation reads the cost from the gateway's explanation: 1 of 2.5 left is 40%
        assert shell.run_script("SELECT count(*) FROM visits SETTINGS dp_epsilon = 1;") == 1
        err = capsys.readouterr().err
        assert "this query costs ε 1, 40% of your remaining ε 2.5" in err and "nothing was charged" in err
        assert shell.run_script("\\refine") == 1  # the gateway refines, but there is nothing to refine yet
        assert "no accuracy-first answer to refine" in capsys.readouterr().err
        assert session.budget().spent.epsilon == 0.5
    finally:
        session.close()
