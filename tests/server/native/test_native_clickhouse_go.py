"""A Grafana panel's query over the native protocol, replayed byte for byte as clickhouse-go v2 sends it, and
dpch's answer decoded as clickhouse-go decodes it (issue 30). No Go toolchain runs here, so the packets are
built from clickhouse-go's source, repository ClickHouse/clickhouse-go at commit
0c09672ddf7252afcdc32db324a2b53a78113377 (v2.48.0, ``ClientVersionMajor/Minor`` in ``client_info.go``):

- ``conn_handshake.go`` ``(*connect).handshake``: byte 0, ``proto.ClientHandshake.Encode`` (``lib/proto/
  handshake.go``: the client name ``ClientInfo.String()`` of ``client_info.go``, major 2, minor 48, revision
  ``DBMS_TCP_PROTOCOL_VERSION`` = 54460 of ``lib/proto/const.go``; no patch), then database, user, password;
  the server's Hello read by ``(*ServerHandshake).Decode``, whose fields depend on the *server's* revision
  (time zone ≥ 54058, display name ≥ 54372, patch ≥ 54401: nothing later); the revision then lowered to
  the server's if that is smaller; ``sendAddendum``: an empty quota key (≥ 54458).
- ``conn_ping.go`` ``(*connect).ping``: byte 4, then Progress packets until Pong (``database/sql``'s
  ``PingContext``, which the Grafana plugin calls in ``Connect``).
- ``conn_send_query.go`` ``(*connect).sendQuery`` → ``lib/proto/query.go`` ``(*Query).Encode``: the query id
  (empty), ``encodeClientInfo`` at 54460 (kind 1, initial user and query id empty, the local address,
  start time 0, interface 1, $USER, host name, the client name with the query's comments, 2, 48, 54460,
  quota key, distributed depth 0, patch 0, no OpenTelemetry span, three parallel-replica zeros), the
  settings (``Setting.encode``: name, flags 0x01 "important" for an ordinary setting, ``fmt.Sprint`` of
  the value), an empty name, the empty inter-server secret, ``StateComplete`` (2), compression as a bool,
  the SQL, no parameters and their empty terminator; then ``conn.go`` ``(*connect).sendData`` of
  ``proto.NewBlock()`` named "": byte 2, "", and the block (``lib/proto/block.go`` ``EncodeHeader``:
  ``encodeBlockInfo`` = 1, false, 2, int32 -1, 0; no columns, no rows), which ``compressBuffer`` turns into
  one compressed frame (ch-go's ``compress.Writer``: CityHash128, method 0x82, sizes, and pierrec/lz4's
  ``CompressBlock``, which writes ten bytes as one literal run: token 0xA0 and the bytes).
- answers: ``conn_process.go`` ``firstBlock``/``process``/``handle`` (one byte per packet type),
  ``conn.go`` ``readData`` (a name, then with compression the block from compressed frames),
  ``lib/proto/block.go`` ``(*Block).Decode`` and ``decodeBlockInfo`` (custom serialization must be false),
  ``lib/proto/progress.go`` (54460: rows, bytes, total rows, written rows and bytes, elapsed),
  ``lib/proto/profile_info.go``, ``lib/proto/exception.go`` (code, name, message, stack, nested).

What Grafana asks of it is from grafana/clickhouse-datasource at commit
02c908d1ef50d51c45aab3d4c353c2814a2fbf3e, ``pkg/plugin/driver.go`` ``Connect``: protocol Native with
``Compression: clickhouse.CompressionLZ4``; the datasource's "custom settings" as ``clickhouse.Settings``
(strings; here ``dp_epsilon``), plus ``limit`` = the row limit when "enable row limit" is on; the client
name from ``getClientInfoProducts`` and, per query, ``MutateQuery``'s comments (user, dashboard, panel).
The panel's SQL is the time-series query of tests/server/test_grafana_time.py (macros expanded as the
plugin does; commit cited in tests/sql/fixtures/bi_time.toml). Go iterates settings maps in random
order; the replay sends them in one fixed order.
"""

from __future__ import annotations

import json
import os
import socket
import struct
from datetime import UTC, datetime

import lz4.block
import pytest
from clickhouse_cityhash.cityhash import CityHash128

from dpch.server.native.wire import Reader, Truncated, int32, string, uint8, uint64, varint
from tests.server.http_post import post
from tests.server.native import packets

pytestmark = pytest.mark.engine

REVISION = 54460  # DBMS_TCP_PROTOCOL_VERSION, lib/proto/const.go
PRODUCTS = "grafana/12.1.0 clickhouse-datasource/4.11.0 clickhouse-go/2.48.0"
CLIENT_NAME = f"{PRODUCTS} (lv:go/1.24.6; os:linux)"  # ClientInfo.String(): products, then (comments; lv; os)
QUERY_CLIENT_NAME = f"{PRODUCTS} (grafana_user:admin; grafana_dashboard:dpch; grafana_panel:2; lv:go/1.24.6; os:linux)"
FROM = int(datetime(2026, 3, 1, tzinfo=UTC).timestamp())
TO = int(datetime(2026, 3, 7, 23, 59, 59, tzinfo=UTC).timestamp())


def panel_sql(database: str) -> str:
    return (f'SELECT toStartOfInterval(toDateTime(visit_date), INTERVAL 86400 second) as "time", count(*) '
            f'FROM "{database}"."visits" WHERE ( visit_date >= toDateTime({FROM}) AND visit_date <= '
            f'toDateTime({TO}) ) GROUP BY time ORDER BY time ASC LIMIT 1000')


# -- what clickhouse-go writes ------------------------------------------------------------------------

def go_hello(database: str, user: str = "grafana", password: str = "bi-pw") -> bytes:
    """``handshake``: PutByte(ClientHello), ClientHandshake.Encode, database, user, password."""
    return (uint8(0) + string(CLIENT_NAME) + varint(2) + varint(48) + varint(REVISION) + string(database)
            + string(user) + string(password))


def go_addendum() -> bytes:
    return string("")  # sendAddendum: the quota key


def go_ping() -> bytes:
    return uint8(4)


def go_query(sql: str, settings: list[tuple[str, str]], local_address: str, compression: bool = True) -> bytes:
    """``sendQuery`` → ``Query.Encode`` at 54460 (``c.revision`` after the handshake)."""
    out = [uint8(1), string("")]  # ClientQuery, query id
    out += [uint8(1), string(""), string(""), string(local_address), uint64(0),  # initial user/id/address/time
            uint8(1), string(os.environ.get("USER", "")), string(socket.gethostname()), string(QUERY_CLIENT_NAME),
            varint(2), varint(48), varint(REVISION),
            string(""), varint(0), varint(0), uint8(0),  # quota key, distributed depth, patch, no span
            varint(0), varint(0), varint(0)]  # parallel replicas
    for key, value in settings:
        out += [string(key), varint(0x01), string(value)]  # flags: Important (not a CustomSetting)
    out += [string(""), string(""), uint8(2), uint8(1 if compression else 0), string(sql), string("")]
    return b"".join(out)


def go_frame(data: bytes) -> bytes:
    """ch-go's ``compress.Writer.Compress`` with LZ4 of fewer than 13 bytes (no match is possible: one literal
    run); the checksum as ClickHouse's CityHash128 v1.0.2, low word first."""
    assert len(data) < 13
    body = uint8(len(data) << 4) + data
    header = struct.pack("<BII", 0x82, len(body) + 9, len(data))
    value = CityHash128(header + body)
    return struct.pack("<QQ", value >> 64, value & (2**64 - 1)) + header + body


EMPTY_BLOCK = varint(1) + uint8(0) + varint(2) + int32(-1) + varint(0) + varint(0) + varint(0)


def go_empty_data(compression: bool = True) -> bytes:
    """``sendData(proto.NewBlock(), "")``: the empty block that ends the external tables."""
    return uint8(2) + string("") + (go_frame(EMPTY_BLOCK) if compression else EMPTY_BLOCK)


# -- how clickhouse-go reads the answer ---------------------------------------------------------------


def read_server_hello(reader: Reader) -> dict:
    """``(*ServerHandshake).Decode`` (packet byte already read): the fields it knows, by the server's revision."""
    hello: dict = {"name": reader.string(), "major": reader.varint(), "minor": reader.varint(),
                   "revision": reader.varint()}
    if hello["revision"] >= 54058:
        hello["timezone"] = reader.string()
    if hello["revision"] >= 54372:
        hello["display_name"] = reader.string()
    if hello["revision"] >= 54401:
        hello["patch"] = reader.varint()
    return hello


def read_block(reader: Reader, revision: int) -> tuple[list[tuple[str, str]], list[tuple]]:
    """``readData`` with compression: the name, then ``(*Block).Decode`` from one decompressed frame."""
    assert reader.string() == ""
    checksum, header = reader.read(16), reader.read(9)
    method, stored, plain = struct.unpack("<BII", header)
    body = reader.read(stored - 9)
    value = CityHash128(header + body)
    assert checksum == struct.pack("<QQ", value >> 64, value & (2**64 - 1))
    assert method == 0x82
    block = packets.bytes_reader(lz4.block.decompress(body, uncompressed_size=plain))
    assert (block.varint(), block.uint8(), block.varint(), block.int32(), block.varint()) == (1, 0, 2, -1, 0)
    ncols, nrows = block.varint(), block.varint()
    columns, values = [], []
    for _ in range(ncols):
        name, type_ = block.string(), block.string()
        if revision >= 54454:
            assert block.uint8() == 0  # "custom serialization ... not supported by clickhouse-go driver"
        columns.append((name, type_))
        width, fmt = {"DateTime": (4, "<I"), "Int64": (8, "<q"), "UInt64": (8, "<Q")}[type_]
        values.append(tuple(struct.unpack(fmt, block.read(width))[0] for _ in range(nrows)))
    with pytest.raises(Truncated):
        block.read(1)  # the frame held the block and nothing else
    return columns, list(zip(*values, strict=True))


def read_exception(reader: Reader) -> tuple[int, str, str]:
    """``Exception.decode``: code, name, message (its "name:" prefix trimmed), stack trace, nested."""
    code, name, message, _stack, nested = reader.int32(), reader.string(), reader.string(), reader.string(), \
        reader.uint8()
    assert nested == 0
    return code, name, message.removeprefix(name + ":").strip()


def read_answer(reader: Reader, revision: int) -> dict:
    """``firstBlock`` then ``process``: packets by their one-byte type up to EndOfStream (or an Exception)."""
    answer: dict = {"packets": [], "blocks": []}
    while True:
        packet = reader.uint8()
        answer["packets"].append(packet)
        if packet == 5:
            return answer
        if packet == 1:
            answer["blocks"].append(read_block(reader, revision))
        elif packet == 2:
            answer["exception"] = read_exception(reader)
            return answer
        elif packet == 3:
            answer["progress"] = [reader.varint() for _ in range(6)]
        elif packet == 6:
            answer["profile"] = (reader.varint(), reader.varint(), reader.varint(), reader.uint8(),
                                 reader.varint(), reader.uint8())
        else:
            raise AssertionError(f"clickhouse-go would fail: unexpected packet {packet}")


def connect(listener, database: str) -> tuple[socket.socket, Reader, int]:
    """The handshake and the Grafana plugin's PingContext; the revision clickhouse-go then uses."""
    sock, reader = packets.connect(listener.port)
    sock.sendall(go_hello(database))
    assert reader.uint8() == 0
    hello = read_server_hello(reader)
    assert hello["name"] == "ClickHouse" and hello["revision"] == 54468
    assert hello["timezone"] and hello["display_name"] and hello["major"] >= 21  # ≥ resources.MinSupportedVersion
    revision = min(REVISION, hello["revision"])
    assert revision == 54460
    sock.sendall(go_addendum() + go_ping())
    assert reader.uint8() == 4  # Pong, and nothing before it: the server's Hello had no field Decode skips
    return sock, reader, revision


def test_a_grafana_panel_query_as_clickhouse_go_sends_it(native):
    http, listener = native(users={"grafana": {"password": "bi-pw", "analyst": "bi", "epsilon": 3.0}})
    db = http.gateway.config.database
    sock, reader, revision = connect(listener, db)
    with sock:
        local = "{}:{}".format(*sock.getsockname()[:2])
        sock.sendall(go_query(panel_sql(db), [("dp_epsilon", "0.5")], local) + go_empty_data())
        answer = read_answer(reader, revision)
        assert answer["packets"] == [1, 1, 6, 3, 5], answer  # header, data, ProfileInfo, Progress, EndOfStream
        (header_columns, header_rows), (columns, rows) = answer["blocks"]
        assert header_rows == [] and header_columns == columns  # the empty header block first
        assert columns == [("time", "DateTime"), ("count(*)", "Int64")]
        days = [FROM + 86400 * d for d in range(7)]
        assert [row[0] for row in rows] == days  # one key per day of the panel's range
        assert answer["profile"] == (7, 1, answer["profile"][2], 0, 0, 1)
        assert answer["progress"] == [0, 0, 0, 0, 0, 0]  # no data-dependent counts
        # the same connection serves the panel's next refresh: the release cache answers it
        sock.sendall(go_query(panel_sql(db), [("dp_epsilon", "0.5")], local) + go_empty_data())
        again = read_answer(reader, revision)
        assert again["blocks"][1][1] == rows
    response, body = post(http, "SELECT spent FROM dpch.budget WHERE dataset = '' FORMAT JSON", user="grafana",
                          password="bi-pw")
    assert json.loads(body)["data"][0]["spent"] == pytest.approx(0.5)  # the datasource's custom setting


def test_refusals_and_a_malformed_variant(native):
    """Negative controls: a refusal is an Exception packet clickhouse-go decodes to dpch's code and message,
    on a connection that stays usable; a row limit that is not a number of rows is refused (36; Grafana's own
    ``limit`` applies to the released rows, tested over HTTP in tests/server/test_grafana_time.py); and the same
    replay with one bit of the empty block's checksum flipped is refused (CHECKSUM_DOESNT_MATCH) and the
    connection closed."""
    http, listener = native(users={"grafana": {"password": "bi-pw", "analyst": "bi", "epsilon": 3.0}})
    db = http.gateway.config.database
    sock, reader, revision = connect(listener, db)
    with sock:
        local = "{}:{}".format(*sock.getsockname()[:2])
        sock.sendall(go_query(f'SELECT * FROM "{db}"."visits"', [], local) + go_empty_data())
        answer = read_answer(reader, revision)
        assert answer["packets"] == [2]
        code, name, message = answer["exception"]
        assert (code, name) == (497, "DB::Exception") and message.startswith("dpch: SELECT * releases rows")
        sock.sendall(go_query(panel_sql(db), [("dp_epsilon", "0.5"), ("limit", "many")], local) + go_empty_data())
        code, _name, message = read_answer(reader, revision)["exception"]
        assert code == 36 and "Invalid value 'many' for setting limit" in message
        sock.sendall(go_ping())
        assert reader.uint8() == 4  # still usable

    sock, reader, revision = connect(listener, db)
    with sock:
        local = "{}:{}".format(*sock.getsockname()[:2])
        data = bytearray(go_empty_data())
        data[2] ^= 0x01  # the first byte of the frame's CityHash128
        sock.sendall(go_query(panel_sql(db), [("dp_epsilon", "0.5")], local) + bytes(data))
        code, _name, message = read_answer(reader, revision)["exception"]
        assert code == 40, message  # CHECKSUM_DOESNT_MATCH
        with pytest.raises(Truncated):
            reader.read(1)  # and the connection is closed
    response, body = post(http, "SELECT spent FROM dpch.budget WHERE dataset = '' FORMAT JSON", user="grafana",
                          password="bi-pw")
    assert json.loads(body)["data"][0]["spent"] == 0.0  # nothing refused was charged


def test_the_column_types_of_time_series_reach_the_client(native):
    """DateTime was framed with clickhouse-connect's compiled reader, which refused dpch's buffer: every answer
    with a Date, DateTime, UUID, IPv4 or Nullable number column was an internal error over native (this replay
    found it). Free constant queries through the real clickhouse-driver, one column of each such type."""
    from clickhouse_driver import Client

    http, listener = native()
    client = Client(host="127.0.0.1", port=listener.port, user="ana", password="ana-pw",
                    database=http.gateway.config.database, connect_timeout=60, send_receive_timeout=120)
    rows, columns = client.execute(
        "SELECT toDate('2026-03-01') AS d, toDateTime(86400, 'UTC') AS t, CAST(NULL AS Nullable(Int64)) AS n, "
        "CAST(2.5 AS Nullable(Float64)) AS f, CAST('00000000-0000-0000-0000-000000000001' AS UUID) AS u, "
        "CAST('10.0.0.1' AS IPv4) AS ip",
        with_column_types=True)
    assert [t for _name, t in columns] == ["Date", "DateTime", "Nullable(Int64)", "Nullable(Float64)",
                                           "UUID", "IPv4"]
    d, t, n, f, u, ip = rows[0]
    assert (str(d), n, f) == ("2026-03-01", None, 2.5) and isinstance(t, datetime)
    assert (str(u), str(ip)) == ("00000000-0000-0000-0000-000000000001", "10.0.0.1")
