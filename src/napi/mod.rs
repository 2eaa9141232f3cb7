//! The napi skin: the `SessionTools` class, JSON in and out of JS, and JS errors with a
//! `code`. The only place napi types appear; all logic lives below it.

mod class;
mod host;
mod js;
mod lanes;
mod port;
