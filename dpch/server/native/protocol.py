"""The native protocol's packets (ClickHouse's ``src/Core/Protocol.h``), read and written by revision.

What a packet holds depends on the revision both sides agreed on, the smaller of the client's and
:data:`SERVER_REVISION`. dpch announces 54468 (the revision clickhouse-driver 0.2.x sends), so every
field a newer server could add (chunked packets, versioned parallel replicas, query-plan packets) is
never in play, and older clients (clickhouse-go at 54460, Debian's clickhouse-client 18.16.1 at 54412)
get the fields of their own revision. The layouts follow ClickHouse's ``TCPHandler::receiveHello``,
``receiveQuery``, ``ClientInfo::read``, ``BaseSettings::read`` and clickhouse-driver's
``connection.py`` / ``clientinfo.py``, which write them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dpch.server.native.wire import ProtocolError, Reader, int32, string, uint8, uint64, varint

# -- revisions (ClickHouse's ProtocolDefines.h) -------------------------------------------------------
REVISION_WITH_TEMPORARY_TABLES = 50264
REVISION_WITH_TOTAL_ROWS_IN_PROGRESS = 51554
REVISION_WITH_BLOCK_INFO = 51903
REVISION_WITH_CLIENT_INFO = 54032
REVISION_WITH_SERVER_TIMEZONE = 54058
REVISION_WITH_QUOTA_KEY_IN_CLIENT_INFO = 54060
REVISION_WITH_SERVER_DISPLAY_NAME = 54372
REVISION_WITH_VERSION_PATCH = 54401
REVISION_WITH_CLIENT_WRITE_INFO = 54420
REVISION_WITH_SETTINGS_SERIALIZED_AS_STRINGS = 54429
REVISION_WITH_INTERSERVER_SECRET = 54441
REVISION_WITH_OPENTELEMETRY = 54442
REVISION_WITH_X_FORWARDED_FOR_IN_CLIENT_INFO = 54443
REVISION_WITH_REFERER_IN_CLIENT_INFO = 54447
REVISION_WITH_DISTRIBUTED_DEPTH = 54448
REVISION_WITH_INITIAL_QUERY_START_TIME = 54449
REVISION_WITH_PARALLEL_REPLICAS = 54453
REVISION_WITH_CUSTOM_SERIALIZATION = 54454
REVISION_WITH_ADDENDUM = 54458
REVISION_WITH_PARAMETERS = 54459
REVISION_WITH_SERVER_QUERY_TIME_IN_PROGRESS = 54460
REVISION_WITH_PASSWORD_COMPLEXITY_RULES = 54461
REVISION_WITH_INTERSERVER_SECRET_V2 = 54462
REVISION_WITH_TOTAL_BYTES_IN_PROGRESS = 54463
#: the revision dpch announces in its Hello
SERVER_REVISION = 54468


class Client:
    """Packet types a client sends."""

    HELLO, QUERY, DATA, CANCEL, PING, TABLES_STATUS_REQUEST, KEEP_ALIVE = 0, 1, 2, 3, 4, 5, 6


class Server:
    """Packet types the server sends."""

    HELLO, DATA, EXCEPTION, PROGRESS, PONG, END_OF_STREAM, PROFILE_INFO = 0, 1, 2, 3, 4, 5, 6


#: ClientInfo's interface byte
INTERFACE_TCP, INTERFACE_HTTP = 1, 2
#: Settings flag of a setting sent as a string (BaseSettings: IMPORTANT 1, CUSTOM 2)
SETTING_CUSTOM = 0x02
#: user names that are not users: markers of the inter-server, SSH and JWT sign-ins (Protocol.h)
AUTH_MARKERS = (" INTERSERVER SECRET ", " SSH KEY AUTHENTICATION ", " JWT AUTHENTICATION ")


@dataclass(frozen=True)
class Hello:
    """The client's Hello."""

    client_name: str
    version_major: int
    version_minor: int
    revision: int
    database: str
    user: str
    password: str


@dataclass(frozen=True)
class Query:
    """A Query packet: the text, its settings (name → value text) and parameters, and the framing asked."""

    query_id: str
    text: str
    settings: dict[str, str] = field(default_factory=dict)
    parameters: dict[str, str] = field(default_factory=dict)
    stage: int = 2
    compression: bool = False


def read_hello(reader: Reader) -> Hello:
    """The client's Hello, packet type included (anything else first is a protocol error)."""
    packet = reader.varint()
    if packet != Client.HELLO:
        raise ProtocolError(f"Unexpected packet from client: expected Hello, got packet type {packet}")
    hello = Hello(reader.string(), reader.varint(), reader.varint(), reader.varint(), reader.string(),
                  reader.string(), reader.string())
    if hello.revision < REVISION_WITH_BLOCK_INFO:
        raise ProtocolError(f"Client revision {hello.revision} is too old (dpch needs {REVISION_WITH_BLOCK_INFO} "
                            "or later)", 48)
    return hello


def negotiated(hello: Hello) -> int:
    """The revision both sides use."""
    return min(hello.revision, SERVER_REVISION)


def server_hello(revision: int, *, version: str, timezone: str, display_name: str) -> bytes:
    """dpch's Hello for a client at ``revision`` (the fields TCPHandler::sendHello writes for it)."""
    major, minor, patch = _version(version)
    out = [varint(Server.HELLO), string("ClickHouse"), varint(major), varint(minor), varint(SERVER_REVISION)]
    if revision >= REVISION_WITH_SERVER_TIMEZONE:
        out.append(string(timezone))
    if revision >= REVISION_WITH_SERVER_DISPLAY_NAME:
        out.append(string(display_name))
    if revision >= REVISION_WITH_VERSION_PATCH:
        out.append(varint(patch))
    if revision >= REVISION_WITH_PASSWORD_COMPLEXITY_RULES:
        out.append(varint(0))  # no password complexity rules
    if revision >= REVISION_WITH_INTERSERVER_SECRET_V2:
        out.append(uint64(0))  # nonce: dpch takes no inter-server sign-ins
    return b"".join(out)


def read_addendum(reader: Reader, revision: int) -> None:
    """What a client sends right after the server's Hello (its quota key), read and ignored."""
    if revision >= REVISION_WITH_ADDENDUM:
        reader.bytes_()


def _version(text: str) -> tuple[int, int, int]:
    parts = [int(p) if p.isdigit() else 0 for p in (text.split(".") + ["0", "0", "0"])[:3]]
    return parts[0], parts[1], parts[2]


def _client_info(reader: Reader, revision: int) -> None:
    """A Query's ClientInfo (ClickHouse's ``ClientInfo::read``); nothing in it is used."""
    kind = reader.uint8()
    if kind == 0:  # NO_QUERY: empty
        return
    reader.bytes_()  # initial_user
    reader.bytes_()  # initial_query_id
    reader.bytes_()  # initial_address
    if revision >= REVISION_WITH_INITIAL_QUERY_START_TIME:
        reader.uint64()
    interface = reader.uint8()
    if interface == INTERFACE_TCP:
        reader.bytes_()  # os_user
        reader.bytes_()  # client_hostname
        reader.bytes_()  # client_name
        reader.varint()
        reader.varint()
        reader.varint()  # version major, minor, revision
    elif interface == INTERFACE_HTTP:
        reader.uint8()  # http method
        reader.bytes_()  # user agent
        if revision >= REVISION_WITH_X_FORWARDED_FOR_IN_CLIENT_INFO:
            reader.bytes_()
        if revision >= REVISION_WITH_REFERER_IN_CLIENT_INFO:
            reader.bytes_()
    if revision >= REVISION_WITH_QUOTA_KEY_IN_CLIENT_INFO:
        reader.bytes_()
    if revision >= REVISION_WITH_DISTRIBUTED_DEPTH:
        reader.varint()
    if interface == INTERFACE_TCP and revision >= REVISION_WITH_VERSION_PATCH:
        reader.varint()
    if revision >= REVISION_WITH_OPENTELEMETRY and reader.uint8():
        reader.read(16)  # trace id
        reader.uint64()  # span id
        reader.bytes_()  # tracestate
        reader.uint8()  # trace flags
    if revision >= REVISION_WITH_PARALLEL_REPLICAS:
        reader.varint()
        reader.varint()
        reader.varint()


#: at most this many settings (or parameters) in one Query packet
MAX_SETTINGS = 4096


def read_settings(reader: Reader, revision: int) -> dict[str, str]:
    """Settings as ``BaseSettings::read`` reads them: name, flags, value text, up to an empty name.

    Before revision 54429 values were written in each setting's own binary type, which cannot be read
    without knowing every setting: such a client may send no settings (put ``dp_*`` in ``SETTINGS``)."""
    settings: dict[str, str] = {}
    while True:
        name = reader.string()
        if not name:
            return settings
        if revision < REVISION_WITH_SETTINGS_SERIALIZED_AS_STRINGS:
            raise ProtocolError(f"Setting {name} cannot be read from a client of revision {revision}: send it in "
                                "the query's SETTINGS clause", 115)
        reader.varint()  # flags (important, custom, tier)
        if len(settings) >= MAX_SETTINGS:
            raise ProtocolError(f"More than {MAX_SETTINGS} settings in one query", 36)
        if name in settings:
            raise ProtocolError(f"Setting {name} is given twice", 36)
        settings[name] = reader.string()


def read_query(reader: Reader, revision: int) -> Query:
    """A Query packet's body (its type already read)."""
    query_id = reader.string()
    if revision >= REVISION_WITH_CLIENT_INFO:
        _client_info(reader, revision)
    settings = read_settings(reader, revision)
    if revision >= REVISION_WITH_INTERSERVER_SECRET:
        reader.bytes_()  # inter-server secret hash: empty from clients
    stage = reader.varint()
    compression = reader.varint()
    if compression > 1:
        raise ProtocolError(f"Unknown compression flag {compression}", 36)
    text = reader.string()
    parameters: dict[str, str] = {}
    if revision >= REVISION_WITH_PARAMETERS:
        parameters = {name: unquote(value) for name, value in read_settings(reader, revision).items()}
    return Query(query_id, text, settings, parameters, stage, bool(compression))


_ESCAPES = {"b": "\b", "f": "\f", "r": "\r", "n": "\n", "t": "\t", "0": "\0", "a": "\a", "v": "\v", "e": "\x1b"}


def unquote(value: str) -> str:
    """A query parameter's value as TCPHandler reads it (``readQuoted``: a single-quoted, backslash-escaped
    string); a value that is not quoted is taken as it is."""
    if len(value) < 2 or value[0] != "'" or value[-1] != "'":
        return value
    out, i, body = [], 0, value[1:-1]
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt == "x" and i + 3 < len(body) and _is_hex(body[i + 2:i + 4]):
                out.append(chr(int(body[i + 2:i + 4], 16)))
                i += 4
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
        elif ch == "'" and i + 1 < len(body) and body[i + 1] == "'":
            out.append("'")
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _is_hex(text: str) -> bool:
    return len(text) == 2 and all(c in "0123456789abcdefABCDEF" for c in text)


# -- server packets -------------------------------------------------------------------------------------

def exception(code: int, message: str) -> bytes:
    """An Exception packet: ClickHouse's code, ``DB::Exception``, its display text, no stack trace."""
    return b"".join([varint(Server.EXCEPTION), int32(code), string("DB::Exception"),
                     string(f"DB::Exception: {message}"), string(""), uint8(0)])


def pong() -> bytes:
    return varint(Server.PONG)


def end_of_stream() -> bytes:
    return varint(Server.END_OF_STREAM)


def progress(revision: int) -> bytes:
    """A Progress packet. dpch reports no rows read (as ``X-ClickHouse-Summary``: no data-dependent counts)."""
    out = [varint(Server.PROGRESS), varint(0), varint(0)]  # read rows, read bytes
    if revision >= REVISION_WITH_TOTAL_ROWS_IN_PROGRESS:
        out.append(varint(0))
    if revision >= REVISION_WITH_TOTAL_BYTES_IN_PROGRESS:
        out.append(varint(0))
    if revision >= REVISION_WITH_CLIENT_WRITE_INFO:
        out += [varint(0), varint(0)]  # written rows, bytes
    if revision >= REVISION_WITH_SERVER_QUERY_TIME_IN_PROGRESS:
        out.append(varint(0))  # elapsed ns
    return b"".join(out)


def profile_info(rows: int, blocks: int, size: int) -> bytes:
    """A ProfileInfo packet for the rows dpch sent (the released rows: never a count of the data).

    Its fields are ClickHouse's ``ProfileInfo::write``: rows, blocks, bytes, applied_limit (0),
    rows_before_limit (0), then calculated_rows_before_limit, which a server always writes as 1 (its
    ``getRowsBeforeLimit()`` sets it just before). A 0 there tells a client to compute the count from its
    own stream tree: clickhouse-client 18.16 then follows a null pointer and crashes after the answer."""
    return b"".join([varint(Server.PROFILE_INFO), varint(rows), varint(blocks), varint(size), uint8(0),
                     varint(0), uint8(1)])


__all__ = ["SERVER_REVISION", "Client", "Hello", "Query", "Server", "end_of_stream", "exception", "negotiated",
           "pong", "profile_info", "progress", "read_addendum", "read_hello", "read_query", "read_settings",
           "server_hello", "unquote"]
