"""``dpch serve``: a ClickHouse-compatible HTTP front, so ClickHouse clients connect unchanged.

:mod:`.http` speaks the protocol, :mod:`.gateway` routes each query to introspection
(:mod:`.introspection`, public metadata only) or to the analyst's :class:`~dpch.session.Session`
(the DP path), :mod:`.formats` has ClickHouse serialise the rows, :mod:`.cache` re-serves
released answers for free, :mod:`.config` maps ClickHouse users to analysts, :mod:`.client`
is the ``dpch://`` remote session, and :mod:`.wire` the JSON both sides share.
"""

from dpch.server.config import ServerConfig, User
from dpch.server.gateway import Gateway
from dpch.server.http import GatewayServer, make_server

__all__ = ["Gateway", "GatewayServer", "ServerConfig", "User", "make_server"]
