"""Connections and secrets: every way a source URL or a client config can be wrong ends as one line on stderr with a
non-zero exit code, and no password ever reaches stdout or stderr.

The URL shapes run through the real console entry point (``conftest.run_cli``) against closed ports, a real
ZooKeeper (a chroot with a digest ACL, a wrong chroot) and the simulated Kafka cluster with SASL/PLAIN."""

from __future__ import annotations

import uuid
import warnings
from pathlib import Path

import pytest
from conftest import run_cli

from rebalancer.errors import InputError, SourceError
from rebalancer.kafka_admin import load_client_config, parse_kafka_url
from rebalancer.zkclient import parse_zk_url, zk_session
from rebalancer.zkserver import free_port

CLOSED = free_port()  # nothing listens here: a parsed URL fails to connect (exit 4) within --timeout


def one_line(result, *, code: int | None = None, secrets: tuple[str, ...] = (), says: tuple[str, ...] = ()) -> str:
    """The run failed with exactly one line on stderr, showing none of ``secrets``; returns that line."""
    out = result.stdout + result.stderr
    for secret in secrets:
        assert secret not in out, out
    assert result.returncode != 0, out
    if code is not None:
        assert result.returncode == code, (result.returncode, out)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in says:
        assert fragment in lines[0], lines[0]
    return lines[0]


# -- source URLs --------------------------------------------------------------------------------------------------
# (url, the secrets it carries, the exit code once parsed: 2 = refused as unusable, 4 = parsed, then unreachable)
SHAPES = [
    # the issue's shapes
    ("zk:/user:Hunter2a@host:1", ("Hunter2a",), 2),
    (f"ZK://user:Hunter2b@127.0.0.1:{CLOSED}", ("Hunter2b",), 4),  # schemes are case-insensitive (RFC 3986)
    (f"KAFKA://user:Hunter2c@127.0.0.1:{CLOSED}", ("Hunter2c",), 4),
    ("kafka:/user:Hunter2d@h:1", ("Hunter2d",), 2),
    (f"zk://user:1234/Hunter2e@127.0.0.1:{CLOSED}", ("Hunter2e",), 4),  # '/' in the password is no chroot
    (f"zk://user:p@Hunter2f@127.0.0.1:{CLOSED}", ("Hunter2f",), 4),  # the LAST '@' ends the userinfo
    # more
    (f"kafka://user:p@Hunter2g@127.0.0.1:{CLOSED}", ("Hunter2g",), 4),
    (f"kafka://user:1234/Hunter2h@127.0.0.1:{CLOSED}", ("Hunter2h",), 4),
    (f"zk://user:@127.0.0.1:{CLOSED}", (), 2),  # empty password
    (f"kafka://user:@127.0.0.1:{CLOSED}", (), 2),
    (f"zk://user:p%40Hunter2i@127.0.0.1:{CLOSED}", ("Hunter2i",), 4),  # '@' percent-encoded
    (f"zk://user:Hunter2j@[::1]:{CLOSED}/kafka", ("Hunter2j",), 4),  # IPv6
    (f"kafka://user:Hunter2k@[::1]:{CLOSED}", ("Hunter2k",), 4),
    (f"zk://user:Hunter2l@::1:{CLOSED}", ("Hunter2l",), 2),  # IPv6 without brackets
    (f"zk://user:Hunter2m@127.0.0.1:{CLOSED}/kafka?x=1", ("Hunter2m",), 2),  # trailing junk
    (f"zk://user:Hunter2n@127.0.0.1:{CLOSED}junk", ("Hunter2n",), 2),
    (f"zk://user:Hunter2o@127.0.0.1:{CLOSED}#frag", ("Hunter2o",), 2),
    (f"kafka://user:Hunter2p@127.0.0.1:{CLOSED}/path", ("Hunter2p",), 2),
    (f"zk://user:Hunter2q@127.0.0.1:{CLOSED},,", ("Hunter2q",), 2),
    (f"zk://user:Hunter2r@127.0.0.1:{CLOSED}\x07", ("Hunter2r",), 2),  # a control character
    (f"zk://user:Hunter2s@127.0.0.1: {CLOSED}", ("Hunter2s",), 2),  # spaces
    (f"zk://user:Hun ter2t@127.0.0.1:{CLOSED}", ("Hun ter2t", "ter2t"), 4),
    (f"  zk://user:Hunter2u@127.0.0.1:{CLOSED}  ", ("Hunter2u",), 4),
    (f"zk://üser:Hünter2v@127.0.0.1:{CLOSED}", ("Hünter2v",), 4),  # unicode
    (f"zk://user:Hunter2w#x?y@127.0.0.1:{CLOSED}", ("Hunter2w",), 4),  # '#' and '?' inside the password
    (f"zk://user:Hunter2x/127.0.0.1:{CLOSED}", ("Hunter2x",), 2),  # the '@' forgotten: no echo of 'user:Hunter2x'
    ("zk//user:Hunter2y@h:1", ("Hunter2y",), 2),  # no scheme
    (f"user:Hunter2z@127.0.0.1:{CLOSED}", ("Hunter2z",), 2),
    ("kafka://user:Hunter3a@", ("Hunter3a",), 2),
    (f"kafka://user@Hunter3b@127.0.0.1:{CLOSED}", ("Hunter3b",), 2),  # no ':' in the userinfo
    (f"ftp://user:Hunter3c@127.0.0.1:{CLOSED}", ("Hunter3c",), 2),
]
ISSUE_SHAPES = SHAPES[:6]


def _ids(shapes):
    return [f"{i}-{url.strip()[:12]}" for i, (url, _, _) in enumerate(shapes)]


@pytest.mark.parametrize(("url", "secrets", "code"), SHAPES, ids=_ids(SHAPES))
def test_snapshot_with_a_malformed_url_is_one_line_and_never_shows_the_secret(tmp_path, url, secrets, code):
    result = run_cli("snapshot", "--source", url, "--out", str(tmp_path / "o"), "--timeout", "1")
    one_line(result, code=code, secrets=secrets)
    assert not (tmp_path / "o").exists()


@pytest.fixture(scope="module")
def approved_run(tmp_path_factory) -> Path:
    """A run directory with an approved plan (from a file:// snapshot), so execute, verify and throttle get as far
    as connecting to the source."""
    from rebalancer.execute import approve
    from rebalancer.formats import write_cluster_json
    from rebalancer.plan import plan_run_dir
    from rebalancer.sim.scenarios import ScenarioParams, build_scenario
    from rebalancer.snapshot import take_snapshot

    base = tmp_path_factory.mktemp("approved")
    write_cluster_json(build_scenario("new-brokers", ScenarioParams(partitions=24)), base / "cluster.json")
    take_snapshot(f"file://{base / 'cluster.json'}", base / "run")
    plan_run_dir(base / "run", "add-brokers", brokers=[12, 13, 14, 15], balance="counts")  # any valid plan
    approve(base / "run", by="test")
    return base / "run"


def _run_args(command: str, run: Path) -> list[str]:
    return {"execute": ["execute", str(run), "--throttle", "10MB/s"],
            "verify": ["verify", str(run)],
            "throttle": ["throttle", str(run), "--clear"]}[command]


@pytest.mark.parametrize("command", ["execute", "verify", "throttle"])
@pytest.mark.parametrize(("url", "secrets", "code"), ISSUE_SHAPES, ids=_ids(ISSUE_SHAPES))
def test_execute_verify_throttle_with_a_malformed_url_never_show_the_secret(approved_run, command, url, secrets, code):
    result = run_cli(*_run_args(command, approved_run), "--source", url, "--timeout", "1")
    one_line(result, code=code, secrets=secrets)


@pytest.mark.parametrize(("url", "secrets", "code"), SHAPES, ids=_ids(SHAPES))
def test_redact_url_never_shows_the_secret(url, secrets, code):
    from rebalancer.urls import redact_url, split_url

    shown = redact_url(url)
    assert shown and "\n" not in shown
    for secret in secrets:
        assert secret not in shown, shown
    if code == 2:
        with pytest.raises(InputError) as err:
            split_url(url, ("zk", "kafka"))
        assert len(str(err.value).splitlines()) == 1
        for secret in secrets:
            assert secret not in str(err.value), str(err.value)


def test_redact_url_keeps_scheme_user_hosts_and_path():
    from rebalancer.urls import redact_url

    assert redact_url("zk://ops:s3cret@h1:2181,h2:2181/kafka") == "zk://ops:***@h1:2181,h2:2181/kafka"
    assert redact_url("ZK://ops:a/b@c@h1:2181/kafka") == "zk://ops:***@h1:2181/kafka"
    assert redact_url("kafka://[::1]:9092") == "kafka://[::1]:9092"
    assert redact_url("zk://h:2181/kafka?password=x") == "zk://h:2181/kafka?…"
    assert redact_url("zk:/ops:s3cret@h:1") == "zk:…"
    assert redact_url("file:///tmp/run@2024/cluster.json") == "file:///tmp/run@2024/cluster.json"  # no secrets there
    assert redact_url("ftp://x") == "ftp://x"
    assert redact_url("/tmp/cluster.json") == "/tmp/cluster.json"
    assert "s3cret" not in redact_url("ops:s3cret@h:1")


@pytest.mark.parametrize(("text", "scheme"), [("file:///x.json", "file"), ("ZK://h:1", "zk"), ("Kafka://h:1", "kafka")])
def test_source_scheme_is_case_insensitive(text, scheme):
    from rebalancer.urls import source_scheme

    assert source_scheme(text) == scheme


@pytest.mark.parametrize(("text", "says"), [
    ("zk:/ops:s3cret@h:1", "unknown source 'zk:…': 'zk:' must be followed by '//'; expected file://PATH"),
    ("ftp://x", "unknown source 'ftp://x': scheme 'ftp' is not file://, zk:// or kafka://; expected"),
    ("ops:s3cret@h:1", "unknown source 'ops:…'"),
    ("/tmp/cluster.json", "unknown source '/tmp/cluster.json': no scheme; expected file://PATH"),
])
def test_source_scheme_says_what_is_wrong_without_echoing(text, says):
    from rebalancer.urls import source_scheme

    with pytest.raises(InputError) as err:
        source_scheme(text)
    assert says in str(err.value) and "s3cret" not in str(err.value)


def test_userinfo_ends_at_the_last_at_sign_and_passwords_may_hold_slashes():
    t = parse_zk_url("zk://user:1234/secret@h1:2181,h2:2182/kafka/prod")
    assert (t.auth, t.hosts, t.chroot) == (("user", "1234/secret"), "h1:2181,h2:2182", "/kafka/prod")
    t = parse_zk_url("Zk://user:p@secret@[::1]:2181/k%40a")
    assert (t.auth, t.hosts, t.chroot) == (("user", "p@secret"), "[::1]:2181", "/k@a")
    assert parse_zk_url("zk://u:p%40ss%2Fw@h:1").auth == ("u", "p@ss/w")
    assert "secret" not in repr(t) and "secret" not in t.display
    k = parse_kafka_url("KAFKA://ops:a/b@c@k1:9092,[::1]:9093/")
    assert k.bootstrap == ("k1:9092", "[::1]:9093") and k.config["sasl_plain_password"] == "a/b@c"
    assert "a/b@c" not in repr(k) and "a/b@c" not in k.display


# -- ZooKeeper: ACLs and chroots ----------------------------------------------------------------------------------
@pytest.fixture
def acl_chroot(zk_server) -> str:
    """hosts/chroot of a Kafka cluster whose chroot and every znode under it carry a digest ACL (kafka:s3cret)."""
    from kazoo.client import KazooClient
    from kazoo.security import make_digest_acl

    from rebalancer import kafka_zk as kz
    from rebalancer.model import Broker, Cluster, Partition

    chroot = f"/acl-{uuid.uuid4().hex[:12]}"
    owner = KazooClient(hosts=zk_server.hosts, auth_data=[("digest", "kafka:s3cret")])
    owner.start(timeout=10)
    try:
        owner.ensure_path(chroot)
        inside = KazooClient(hosts=zk_server.hosts + chroot, auth_data=[("digest", "kafka:s3cret")])
        inside.start(timeout=10)
        try:
            kz.write_cluster(inside, Cluster.build([Broker(0)], [Partition("t", 0, (0,), 0, (0,), 0)]))
        finally:
            inside.stop()
            inside.close()
        acl = [make_digest_acl("kafka", "s3cret", all=True)]

        def lock(path: str) -> None:
            for child in owner.get_children(path):
                lock(f"{path}/{child}")
            owner.set_acls(path, acl)

        lock(chroot)
    finally:
        owner.stop()
        owner.close()
    return f"{zk_server.hosts}{chroot}"


@pytest.mark.parametrize(("creds", "how"), [("", "with no credentials"), ("kafka:wr0ng-pw@", "with the given credentials")])
def test_acl_chroot_without_the_right_credentials_is_denied_in_one_line(tmp_path, acl_chroot, creds, how):
    result = run_cli("snapshot", "--source", f"zk://{creds}{acl_chroot}", "--out", str(tmp_path / "o"), "--timeout", "5")
    line = one_line(result, code=4, secrets=("wr0ng-pw", "s3cret"), says=("denied", how))
    assert "internal error" not in line and not (tmp_path / "o").exists()
    ok = run_cli("snapshot", "--source", f"zk://kafka:s3cret@{acl_chroot}", "--out", str(tmp_path / "ok"), "--quiet")
    assert ok.returncode == 0 and "s3cret" not in ok.stdout + ok.stderr, ok.stderr


def test_acl_chroot_is_denied_by_zk_session_itself(acl_chroot):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # kazoo's "No chroot path exists" warning would fail the test
        with pytest.raises(SourceError, match=r"^ZooKeeper at zk://\S+ denied access .* with no credentials"):
            with zk_session(parse_zk_url(f"zk://{acl_chroot}"), timeout=5):
                pass
        with pytest.raises(SourceError, match=r"denied access .* with the given credentials"):
            with zk_session(parse_zk_url(f"zk://kafka:nope@{acl_chroot}"), timeout=5, expect_kafka=True):
                pass
        with zk_session(parse_zk_url(f"zk://kafka:s3cret@{acl_chroot}"), timeout=5, expect_kafka=True) as zk:
            assert zk.get_children("/brokers/topics") == ["t"]


@pytest.mark.parametrize("suffix", ["/no-such-chroot", ""])
def test_wrong_chroot_is_one_line_from_zk_session(zk_url, suffix):
    """A chroot that does not exist, or exists with no Kafka in it: one SourceError, no kazoo warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(SourceError, match=r"^no Kafka metadata at zk://127\.0\.0\.1:\d+/t-\w+"
                                              + suffix + r" \(no /brokers/ids\): wrong chroot\?$"):
            with zk_session(parse_zk_url(zk_url + suffix), timeout=5, expect_kafka=True):
                pass
        with zk_session(parse_zk_url(zk_url + suffix), timeout=5):  # not asked to check: connects, says nothing
            pass


@pytest.mark.parametrize("command", ["snapshot", "execute", "verify", "throttle"])
def test_wrong_chroot_through_the_cli_is_one_line_exit_4(tmp_path, approved_run, zk_url, command):
    url = zk_url + "/not-kafka"
    args = ["snapshot", "--out", str(tmp_path / "o")] if command == "snapshot" else _run_args(command, approved_run)
    result = run_cli(*args, "--source", url, "--timeout", "5")
    line = one_line(result, code=4, says=("no Kafka metadata", "wrong chroot"))
    assert "rerun" not in line and "Warning" not in result.stderr


def test_unreachable_zookeeper_leaves_no_thread_output(tmp_path):
    result = run_cli("snapshot", "--source", f"zk://ops:Hunter9@127.0.0.1:{CLOSED}/kafka", "--out", str(tmp_path / "o"),
                     "--timeout", "1")
    one_line(result, code=4, secrets=("Hunter9",), says=("cannot connect to ZooKeeper at zk://127.0.0.1:",))


# -- Kafka: SASL and client config files -------------------------------------------------------------------------
MULTILINE_JAAS = [
    # the standard continuation form
    "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
    '    username="ops" \\\n'
    '    password="correct-horse";\n',
    # unquoted option values, CRLF line ends, a comment between settings, ':' as the separator
    "# ops\r\nsecurity.protocol : SASL_PLAINTEXT\r\n"
    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\r\n"
    "\tusername=ops \\\r\n"
    "\tpassword=correct-horse;\r\n",
]


@pytest.mark.parametrize("text", MULTILINE_JAAS, ids=["quoted", "unquoted-crlf"])
def test_multiline_jaas_config_parses(tmp_path, text):
    cfg = tmp_path / "client.properties"
    cfg.write_text(text, newline="")
    assert load_client_config(cfg)["sasl_plain_username"] == "ops"
    assert load_client_config(cfg)["sasl_plain_password"] == "correct-horse"


def test_java_properties_continuations_and_escapes(tmp_path):
    cfg = tmp_path / "client.properties"
    cfg.write_text("client.id=a\\\\\n"          # an escaped backslash ends the line: no continuation
                   "# a comment \\\n"           # a comment line is never continued
                   "request.timeout.ms=12\\\n"
                   "   345\n"
                   "ssl.endpoint.identification.algorithm=\n"
                   'sasl.jaas.config=x.PlainLoginModule required username="o\\\\"ps" password="p;w\\\\"d";\n')
    conf = load_client_config(cfg)
    assert conf["client_id"] == "a\\" and conf["request_timeout_ms"] == "12345"
    assert conf["sasl_plain_username"] == 'o"ps' and conf["sasl_plain_password"] == 'p;w"d'


def test_multiline_jaas_config_is_used_against_a_sasl_cluster(tmp_path, make_sim):
    from rebalancer.sim.scenarios import ScenarioParams, build_scenario

    sim = make_sim(build_scenario("new-brokers", ScenarioParams(partitions=12, mean_partition_mib=16)),
                   acceleration=200.0, sasl_users={"ops": "correct-horse"})
    for i, text in enumerate(MULTILINE_JAAS):
        cfg = tmp_path / f"client{i}.properties"
        cfg.write_text(text, newline="")
        result = run_cli("snapshot", "--source", f"kafka://{sim.bootstrap}", "--kafka-config", str(cfg),
                         "--out", str(tmp_path / f"run{i}"), "--quiet")
        assert result.returncode == 0, result.stderr
        assert "SASL_PLAINTEXT, user ops" in result.stdout and "horse" not in result.stdout + result.stderr


def test_wrong_sasl_password_is_rejected_in_the_url_and_in_the_config_file(tmp_path, make_sim):
    """Both say "rejected", in one line, with the password nowhere; a single bootstrap broker and a short window,
    so the answer cannot depend on which of many connection attempts happened to read the broker's reply."""
    from rebalancer.sim.scenarios import ScenarioParams, build_scenario

    sim = make_sim(build_scenario("new-brokers", ScenarioParams(partitions=12, mean_partition_mib=16)),
                   acceleration=200.0, sasl_users={"ops": "correct-horse"})
    one = sim.bootstrap.split(",")[0]
    cfg = tmp_path / "wrong.properties"
    cfg.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                   "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
                   '  username="ops" password="wrong-horse";\n')
    for _ in range(3):
        for args in (["--source", f"kafka://ops:wrong-horse@{one}"],
                     ["--source", f"kafka://{one}", "--kafka-config", str(cfg)]):
            result = run_cli("snapshot", *args, "--timeout", "3", "--out", str(tmp_path / "nope"))
            one_line(result, code=4, secrets=("horse",), says=("rejected the SASL credentials", "user ops"))
            assert not (tmp_path / "nope").exists()


@pytest.mark.parametrize("text", [
    # continuation backslashes forgotten: the password line stands alone
    "security.protocol=SASL_PLAINTEXT\n"
    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required\n"
    '    username="ops"\n    password="Sw0rdfish1";\n',
    "ssl.key.password Sw0rdfish1\n",                    # whitespace separator: not one this reader takes
    "Sw0rdfish1\n",                                     # a bare secret on a line of its own
    '"Sw0rdfish1";\n',
    "sasl.pasword=Sw0rdfish1\n",                        # a typo in a key holding a password
    "security.protocol=SASL_PLAINTEXT\nsasl.password=Sw0rdfish1\n",   # no username: refused, password unsaid
    '{"sasl_plain_password": "Sw0rdfish1", }\n',       # invalid JSON
    '{"sasl_plain_passwd": "Sw0rdfish1"}\n',           # unknown JSON key
    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
    '    username="ops" password="Sw0rdfish1"; \\\n    junk\n',
])
def test_config_file_errors_never_print_the_password(tmp_path, text):
    cfg = tmp_path / "client.properties"
    cfg.write_text(text)
    result = run_cli("snapshot", "--source", "kafka://127.0.0.1:9", "--kafka-config", str(cfg), "--timeout", "1",
                     "--out", str(tmp_path / "o"))
    one_line(result, code=2, secrets=("Sw0rdfish1", "Sw0rd"))
    assert not (tmp_path / "o").exists()


def test_forgotten_continuation_says_so(tmp_path):
    cfg = tmp_path / "client.properties"
    cfg.write_text(MULTILINE_JAAS[0].replace(" \\\n", "\n"))
    with pytest.raises(InputError, match=r"client\.properties:4: unknown Kafka client property 'username' "
                                          r"\(a continuation of sasl\.jaas\.config\? end the line before it with '\\'\)$"):
        load_client_config(cfg)
