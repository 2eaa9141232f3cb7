//! The outbox listener of a PostgreSQL store: one connection of its own, outside the pool, that
//! `LISTEN`s on the outbox channel (`store::outbox::OUTBOX_CHANNEL`) and calls the wakers
//! registered with [`Listener::add`] when an item is recorded in this store's schema, by any
//! process on any host. It connects when the first waker is registered, reconnects (with a
//! growing pause) when the server drops it, and wakes once after each connect for what it may
//! have missed while it was not listening; it stops when the store closes.
//!
//! A wake only shortens a wait: the engine still polls, so a lost notification delays work,
//! never loses it. This module never reads or writes rows.

use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_postgres::{AsyncMessage, Config};
use tokio_postgres_rustls::MakeRustlsConnect;

/// Called when an outbox item was recorded (it must return quickly: it runs on the store's
/// runtime).
pub type Waker = Box<dyn Fn() + Send + Sync>;

/// Listens on the outbox channel (constant text; the channel is `OUTBOX_CHANNEL`).
const LISTEN: &str = "LISTEN session_tools_outbox";
/// The schema this connection's tables resolve to: a notification names the schema of the
/// store that sent it (several stores may share one database under different schemas).
const SCHEMA: &str = "SELECT coalesce(current_schema(), '')";
/// The listening connection's `application_name`.
pub(super) const APPLICATION_NAME: &str = "session-tools-listener";
/// The pause before the first reconnect, doubled up to the longest.
const RETRY_FIRST: Duration = Duration::from_millis(250);
const RETRY_LONGEST: Duration = Duration::from_secs(30);

pub(super) struct Listener {
    config: Config,
    tls: MakeRustlsConnect,
    wakers: Arc<Mutex<Vec<Waker>>>,
    started: Once,
    stop: watch::Sender<bool>,
}

impl Listener {
    pub(super) fn new(mut config: Config, tls: MakeRustlsConnect) -> Listener {
        // named apart from the pool's connections, for whoever reads pg_stat_activity
        config.application_name(APPLICATION_NAME);
        Listener { config, tls, wakers: Arc::default(), started: Once::new(), stop: watch::channel(false).0 }
    }

    /// Registers `waker`, starting the listening connection on `rt` the first time.
    pub(super) fn add(&self, rt: &tokio::runtime::Runtime, waker: Waker) {
        lock(&self.wakers).push(waker);
        self.started.call_once(|| {
            let (config, tls, wakers, stop) =
                (self.config.clone(), self.tls.clone(), self.wakers.clone(), self.stop.subscribe());
            rt.spawn(listen(config, tls, wakers, stop));
        });
    }

    /// Ends the listening connection for good.
    pub(super) fn stop(&self) {
        self.stop.send_replace(true);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn wake_all(wakers: &Mutex<Vec<Waker>>) {
    for w in lock(wakers).iter() {
        w();
    }
}

async fn listen(
    config: Config,
    tls: MakeRustlsConnect,
    wakers: Arc<Mutex<Vec<Waker>>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut pause = RETRY_FIRST;
    loop {
        if *stop.borrow() {
            return;
        }
        match session(&config, &tls, &wakers, &mut stop).await {
            Session::Stopped => return,
            // it had listened: the next drop starts over from the shortest pause
            Session::Dropped => pause = RETRY_FIRST,
            Session::Failed => {}
        }
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = stop.changed() => return,
        }
        pause = (pause * 2).min(RETRY_LONGEST);
    }
}

enum Session {
    /// the store closed
    Stopped,
    /// the connection ended after it had listened
    Dropped,
    /// it could not connect or listen
    Failed,
}

/// One listening connection, until it drops or the store closes.
async fn session(
    config: &Config,
    tls: &MakeRustlsConnect,
    wakers: &Mutex<Vec<Waker>>,
    stop: &mut watch::Receiver<bool>,
) -> Session {
    let Ok((client, mut conn)) = config.connect(tls.clone()).await else {
        return Session::Failed;
    };
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    // The connection is driven here (its notifications come only through `poll_message`).
    let driver = tokio::spawn(async move {
        while let Some(Ok(message)) = std::future::poll_fn(|cx| conn.poll_message(cx)).await {
            if let AsyncMessage::Notification(n) = message {
                if tx.send(n.payload().to_owned()).is_err() {
                    return;
                }
            }
        }
    });
    let ready = async {
        let schema: String = client.query_one(SCHEMA, &[]).await?.get(0);
        client.batch_execute(LISTEN).await?;
        Ok::<_, tokio_postgres::Error>(schema)
    };
    let schema = tokio::select! {
        r = ready => r.ok(),
        _ = stop.changed() => {
            driver.abort();
            return Session::Stopped;
        }
    };
    let Some(schema) = schema else {
        driver.abort();
        return Session::Failed;
    };
    wake_all(wakers);
    loop {
        tokio::select! {
            payload = rx.recv() => match payload {
                Some(p) if p == schema => wake_all(wakers),
                Some(_) => {}
                None => return Session::Dropped,
            },
            _ = stop.changed() => {
                driver.abort();
                return Session::Stopped;
            }
        }
    }
}

#[cfg(test)]
#[path = "listen_tests.rs"]
mod tests;
