"""The web console of ``dpch serve``: ``/play`` for analysts, ``/admin`` for data owners.

Served from the gateway's own port (no build step, no CDN: the pages, scripts and styles are
package data in ``static/``; charts are inline SVG drawn by ``static/charts.js``). Sign-in uses the
gateway's users (:mod:`.security`: cookie session, CSRF token, Content-Security-Policy); the
analyst's endpoints (:mod:`.analyst`) answer through the gateway's DP path, the owner's
(:mod:`.owner`) through the accounting API; an analyst's saved queries (:mod:`.saved`) live in dpch's
own table. :mod:`.app` routes. See docs/console.md.
"""

from dpch.server.console.app import Console, is_console_path
from dpch.server.console.requests import Request

__all__ = ["Console", "Request", "is_console_path"]
