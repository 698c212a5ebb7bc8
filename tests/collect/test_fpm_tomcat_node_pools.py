"""PHP-FPM's, Tomcat's and Node.js's pools read from their config files and processes."""

from __future__ import annotations

from pathlib import Path

from pinchpoint.collect.servers import pool_of
from pinchpoint.collect.servers.php_fpm import pools
from pinchpoint.collect.servers.pool import ASYNC, SYNC, THREADS, Pool, ServerProcess

BOOTSTRAP = "org.apache.catalina.startup.Bootstrap"


def _pool(process: ServerProcess, files: bool = True) -> Pool:
    pool = pool_of(process, 2, files)
    assert pool is not None
    return pool


def _fpm(conf: Path, children: int = 0, *args: str) -> ServerProcess:
    return ServerProcess(1, [f"php-fpm: master process ({conf})", *args], None, {}, children)


def test_php_fpm_sums_the_pools_its_config_includes(tmp_path: Path) -> None:
    (tmp_path / "pool.d").mkdir()
    (tmp_path / "php-fpm.conf").write_text(
        "[global]\npid = /run/fpm.pid\n; include=/nowhere/*.conf\n"
        f"include = {tmp_path}/pool.d/*.conf\n"
    )
    (tmp_path / "pool.d" / "www.conf").write_text(
        "[www]\nlisten = /run/php/$pool.sock\npm = dynamic\npm.max_children = 5\n"
        "pm.start_servers = 2\npm.max_spare_servers = 3\nlisten.backlog = 511\n"
    )
    (tmp_path / "pool.d" / "api.conf").write_text(
        '[api]\npm = static\npm.max_children = "12" ; twelve\n'
    )
    pool = _pool(_fpm(tmp_path / "php-fpm.conf", children=9))
    assert (pool.kind, pool.processes, pool.threads, pool.slots) == (SYNC, 17, 1, 17)
    assert "pool api: pm = static, pm.max_children = 12" in pool.source
    assert "pool www: pm = dynamic, pm.max_children = 5" in pool.source
    assert "listen.backlog = 511" in pool.source
    assert str(tmp_path / "pool.d" / "www.conf") in pool.source
    (www,) = [p for p in pools(_fpm(tmp_path / "php-fpm.conf")) if p.name == "www"]
    assert www.settings["listen"][0] == "/run/php/www.sock"
    assert www.settings["pm.start_servers"][0] == "2"


def test_php_fpm_relative_include_is_under_its_prefix(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "one.conf").write_text("[one]\npm.max_children = 4\ninclude=etc/one.conf\n")
    conf = tmp_path / "fpm.conf"
    conf.write_text("include=etc/*.conf\n")
    pool = _pool(ServerProcess(1, ["php-fpm8.2", "-y", str(conf), "-p", str(tmp_path)]))
    assert pool.slots == 4  # the file that includes itself is read no deeper than 8 times


def test_php_fpm_without_a_readable_config_counts_its_workers(tmp_path: Path) -> None:
    assert _pool(_fpm(tmp_path / "missing.conf", children=3)).slots == 3
    (tmp_path / "fpm.conf").write_text("[www]\npm.max_children = ${CHILDREN}\n")
    pool = _pool(_fpm(tmp_path / "fpm.conf", children=2))
    assert (pool.slots, pool.source) == (2, "its worker processes counted")
    (tmp_path / "ok.conf").write_text("[www]\npm.max_children = 6\n")
    assert _pool(_fpm(tmp_path / "ok.conf", children=2), files=False).slots == 2


def _tomcat(base: Path, *args: str) -> ServerProcess:
    argv = ["/usr/bin/java", f"-Dcatalina.base={base}", *args, BOOTSTRAP, "start"]
    return ServerProcess(1, argv, None, {}, 0)


def _server_xml(folder: Path, services: str) -> None:
    (folder / "conf").mkdir(exist_ok=True)
    (folder / "conf" / "server.xml").write_text(f'<Server port="-1">{services}</Server>')


def test_tomcat_connector_threads_its_executor_and_default(tmp_path: Path) -> None:
    _server_xml(
        tmp_path,
        '<Service name="a"><Executor name="shared" maxThreads="150"/>'
        '<Connector port="8080" executor="shared" acceptCount="50"/>'
        '<Connector port="8081" executor="shared"/>'
        '<Connector port="8009" protocol="AJP/1.3" maxThreads="999"/></Service>'
        '<Service name="b"><Connector port="9090" maxThreads="${http.threads}"/>'
        '<Connector port="9091"/></Service>',
    )
    pool = _pool(_tomcat(tmp_path, "-Dhttp.threads=40"))
    # The executor counted once, the AJP connector left out, 200 when unset.
    assert (pool.kind, pool.processes, pool.threads) == (THREADS, 1, 150 + 40 + 200)
    assert "Connector port 8080: Executor shared maxThreads = 150, acceptCount = 50" in pool.source
    assert "Connector port 9090: maxThreads = 40, acceptCount = 100" in pool.source
    assert str(tmp_path / "conf" / "server.xml") in pool.source


def test_tomcat_config_option_and_unreadable_server_xml(tmp_path: Path) -> None:
    (tmp_path / "other.xml").write_text(
        '<Server><Service><Connector port="1" maxThreads="9"/></Service></Server>'
    )
    assert _pool(_tomcat(tmp_path, "-config", str(tmp_path / "other.xml"))).threads == 200
    named = ServerProcess(
        1, ["java", f"-Dcatalina.base={tmp_path}", BOOTSTRAP, "-config", "other.xml", "start"]
    )
    assert _pool(named).threads == 9
    _server_xml(tmp_path, "<Service><Connector")  # broken
    pool = _pool(_tomcat(tmp_path))
    assert (pool.threads, pool.source) == (200, "Tomcat's default maxThreads (server.xml not read)")


def test_node_is_an_event_loop_in_each_process() -> None:
    single = _pool(ServerProcess(1, ["node", "server.js"]))
    assert (single.kind, single.processes, single.slots) == (ASYNC, 1, None)
    cluster = _pool(ServerProcess(1, ["/usr/bin/nodejs", "cluster.js"], None, {}, 4))
    assert (cluster.kind, cluster.processes) == (ASYNC, 4)
    assert pool_of(ServerProcess(1, ["/usr/bin/node_exporter"]), 2) is None
