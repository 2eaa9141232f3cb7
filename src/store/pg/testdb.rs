//! Test support: a PostgreSQL server for the store's tests, and a fresh schema on it per test.
//!
//! The server is the one `SESSION_TOOLS_TEST_PG_URL` names (the test scripts start a throwaway
//! cluster and set it); when it is not set, the first test that needs a server starts one of its
//! own with the machine's `initdb` / `pg_ctl` in a temporary folder, listening only on a Unix
//! socket there, and stops it when the test process exits. Without either, the tests that need
//! it fail, saying what to install: they are never skipped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The URL of the test server (started on first use, see the module header).
pub fn server_url() -> String {
    static URL: OnceLock<Result<String, String>> = OnceLock::new();
    match URL.get_or_init(|| match std::env::var("SESSION_TOOLS_TEST_PG_URL") {
        Ok(u) if !u.trim().is_empty() => Ok(u),
        _ => start_cluster(),
    }) {
        Ok(u) => u.clone(),
        Err(why) => panic!("{why}"),
    }
}

/// A URL of the test server with a schema of its own, new for each call.
pub fn fresh_url() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let base = server_url();
    let schema = format!("t{}_{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}schema={schema}")
}

fn find_bin(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    if let Ok(rd) = std::fs::read_dir("/usr/lib/postgresql") {
        let mut versions: Vec<PathBuf> = rd.flatten().map(|e| e.path().join("bin")).collect();
        versions.sort();
        dirs.extend(versions.into_iter().rev());
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

fn start_cluster() -> Result<String, String> {
    let dir = start("main", "", |_| Ok(()))?;
    Ok(format!("postgres://postgres@localhost/postgres?host={}", dir.display()))
}

/// Starts a throwaway cluster in a new temp folder (named after `tag`), listening on a Unix
/// socket there, with `extra` server options (`{dir}` in them is the folder); `prepare` runs on the folder (owned by the server's
/// user) before the server starts. The cluster is stopped and removed when the process exits.
pub fn start(tag: &str, extra: &str, prepare: impl FnOnce(&Path) -> Result<(), String>) -> Result<PathBuf, String> {
    let missing = "the PostgreSQL tests need a server: set SESSION_TOOLS_TEST_PG_URL to one, or install the \
                   PostgreSQL server binaries (initdb, pg_ctl; Debian: apt install postgresql) so a throwaway \
                   cluster can be started";
    let initdb = find_bin("initdb").ok_or(missing)?;
    let pg_ctl = find_bin("pg_ctl").ok_or(missing)?;
    let dir = std::env::temp_dir().join(format!("session-tools-pg-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    prepare(&dir)?;
    let data = dir.join("data");
    let user = server_user();
    if let Some(u) = &user {
        // initdb refuses to run as root: the cluster belongs to an unprivileged user.
        run(Command::new("chown").args(["-R", u]).arg(&dir))?;
    }
    run(as_user(&user, &initdb)
        .args(["-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C", "-D"])
        .arg(&data))?;
    let opts = format!(
        "-c listen_addresses='' -c unix_socket_directories='{}' -c fsync=off -c synchronous_commit=off \
         -c full_page_writes=off -c max_connections=200 {}",
        dir.display(),
        extra.replace("{dir}", &dir.display().to_string())
    );
    let started = run(as_user(&user, &pg_ctl)
        .arg("-D")
        .arg(&data)
        .args(["-w", "-s", "-l"])
        .arg(dir.join("log"))
        .args(["-o", &opts, "start"]));
    if let Err(e) = started {
        let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
        return Err(format!("{e}\n{log}"));
    }
    register_stop(pg_ctl, data, user);
    Ok(dir)
}

extern "C" {
    fn geteuid() -> u32;
}

/// The user the cluster runs as when this process is root (`postgres`, else `nobody`).
fn server_user() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { geteuid() } != 0 {
        return None;
    }
    let known = |u: &str| Command::new("id").arg(u).output().is_ok_and(|o| o.status.success());
    Some(if known("postgres") { "postgres" } else { "nobody" }.to_owned())
}

fn as_user(user: &Option<String>, bin: &Path) -> Command {
    match user {
        Some(u) => {
            let mut c = Command::new("runuser");
            c.args(["-u", u, "--"]).arg(bin);
            c
        }
        None => Command::new(bin),
    }
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(())
}

static STOP: std::sync::Mutex<Vec<(PathBuf, PathBuf, Option<String>)>> = std::sync::Mutex::new(Vec::new());

extern "C" fn stop_cluster() {
    let clusters = std::mem::take(&mut *STOP.lock().unwrap_or_else(|p| p.into_inner()));
    for (pg_ctl, data, user) in &clusters {
        let _ = as_user(user, pg_ctl).arg("-D").arg(data).args(["-m", "immediate", "-s", "stop"]).output();
        if let Some(dir) = Path::new(data).parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

extern "C" {
    fn atexit(cb: extern "C" fn()) -> std::os::raw::c_int;
}

fn register_stop(pg_ctl: PathBuf, data: PathBuf, user: Option<String>) {
    let mut clusters = STOP.lock().unwrap_or_else(|p| p.into_inner());
    clusters.push((pg_ctl, data, user));
    if clusters.len() == 1 {
        // SAFETY: registers a plain function with no arguments to run at process exit.
        unsafe {
            atexit(stop_cluster);
        }
    }
}

/// Runs `sql` on the test server (outside any store), for setting up a case.
pub fn exec(sql: &str) {
    let url = server_url();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
        tokio::spawn(conn);
        client.batch_execute(sql).await.expect("setup statement");
    });
}

/// One store of each backend (an in-memory SQLite one and a fresh PostgreSQL schema), for tests
/// that hold on both: `for s in testdb::stores() { … }`.
pub fn stores() -> [crate::store::Store; 2] {
    let lite = crate::store::Store::open(":memory:").expect("open an in-memory store");
    let pg = crate::store::Store::open(&fresh_url()).expect("open a PostgreSQL store");
    [lite, pg]
}

/// A plain session on the test server, outside any store: to hold the stores' write lock, or
/// to see what other sessions wait for.
pub struct Session {
    rt: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
}

impl Session {
    pub fn open() -> Session {
        let url = server_url();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let client = rt.block_on(async {
            let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
            tokio::spawn(conn);
            client
        });
        Session { rt, client }
    }

    /// Opens a transaction holding the advisory write lock every store's write transaction takes
    /// (returns once it holds it); [`Session::end`] lets it go.
    pub fn hold_write_lock(&self) {
        let sql = format!("BEGIN; SELECT pg_advisory_xact_lock({})", super::WRITE_LOCK);
        self.rt.block_on(self.client.batch_execute(&sql)).expect("take the write lock");
    }

    /// Whether this session holds the write lock now.
    pub fn holds_write_lock(&self) -> bool {
        let sql = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid() \
                   AND ((classid::bigint << 32) | objid::bigint) = $1";
        self.count(sql, &[&super::WRITE_LOCK]) == 1
    }

    /// Ends this session's transaction (letting its locks go).
    pub fn end(&self) {
        self.rt.block_on(self.client.batch_execute("ROLLBACK")).expect("roll back");
    }

    /// The count a `SELECT count(*) …` answers.
    pub fn count(&self, sql: &str, args: &[&(dyn tokio_postgres::types::ToSql + Sync)]) -> i64 {
        self.rt.block_on(self.client.query_one(sql, args)).expect("count").get(0)
    }

    /// Waits (polling; up to 60 s, then fails) until a session named `application_name` waits
    /// for a lock.
    pub fn until_waiting_on_a_lock(&self, application_name: &str) {
        let sql = "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'";
        for _ in 0..6_000 {
            if self.count(sql, &[&application_name]) > 0 {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("no session named {application_name} waited for a lock");
    }
}

/// The `application_name` of a store's lease-renewing connection.
pub const LEASE_CONNECTION: &str = super::lease::APPLICATION_NAME;
