//! Level formats by name. A new level format is one file plus one
//! `register` line here (or a `register` call from outside the crate).

use super::error::FormatError;
use super::level::LevelFormat;
use super::levels::*;
use std::sync::Arc;

/// A level as written in a level list: its name, flags (`nonunique`) and
/// settings (`W=1024`), plus the AoS layout the list assigned it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LevelArgs {
    pub name: String,
    pub flags: Vec<String>,
    pub settings: Vec<(String, String)>,
    pub aos: Option<CrdLayout>,
}

impl LevelArgs {
    pub fn has(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f.eq_ignore_ascii_case(flag))
    }
    pub fn setting(&self, key: &str) -> Option<&str> {
        self.settings
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
    }
    fn bad(&self, reason: impl Into<String>) -> FormatError {
        FormatError::BadProperty {
            level: self.name.clone(),
            reason: reason.into(),
        }
    }
    /// Reject flags and settings outside `allowed`.
    pub fn only(&self, allowed: &[&str]) -> Result<(), FormatError> {
        for f in self
            .flags
            .iter()
            .chain(self.settings.iter().map(|(k, _)| k))
        {
            if !allowed.iter().any(|a| a.eq_ignore_ascii_case(f)) {
                let what = if allowed.is_empty() {
                    "takes no properties".to_string()
                } else {
                    format!("accepts only {}", allowed.join(", "))
                };
                return Err(self.bad(format!("unknown property `{f}`: {} {what}", self.name)));
            }
        }
        Ok(())
    }
    /// `ordered` unless `unordered`, `unique` unless `nonunique`.
    fn order_unique(&self) -> (bool, bool) {
        (!self.has("unordered"), !self.has("nonunique"))
    }
}

pub type LevelCtor = fn(&LevelArgs) -> Result<Arc<dyn LevelFormat>, FormatError>;

#[derive(Clone)]
pub struct Registry {
    entries: Vec<(&'static str, LevelCtor)>,
}

impl Registry {
    /// The paper's six level formats.
    pub fn builtin() -> Self {
        let mut r = Registry {
            entries: Vec::new(),
        };
        r.register("dense", dense);
        r.register("compressed", compressed);
        r.register("singleton", singleton);
        r.register("range", range);
        r.register("offset", offset);
        r.register("hashed", hashed);
        r
    }

    pub fn register(&mut self, name: &'static str, ctor: LevelCtor) {
        self.entries.retain(|(n, _)| *n != name);
        self.entries.push((name, ctor));
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.entries.iter().map(|(n, _)| *n).collect()
    }

    pub fn build(&self, args: &LevelArgs) -> Result<Arc<dyn LevelFormat>, FormatError> {
        let ctor = self
            .entries
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(&args.name))
            .map(|(_, c)| *c)
            .ok_or_else(|| FormatError::UnknownLevel {
                name: args.name.clone(),
                known: self.names().join(", "),
            })?;
        if args.aos.is_some() && !args.has("aos") {
            return Err(args.bad("internal: AoS layout without the aos flag"));
        }
        ctor(args)
    }
}

fn dense(a: &LevelArgs) -> Result<Arc<dyn LevelFormat>, FormatError> {
    if a.has("unordered") || a.has("nonunique") {
        return Err(
            a.bad("a dense level enumerates 0..N once each: it is always ordered and unique")
        );
    }
    a.only(&["ordered", "unique"])?;
    Ok(Arc::new(Dense))
}

fn layout(a: &LevelArgs) -> Result<CrdLayout, FormatError> {
    match (a.has("aos"), a.aos) {
        (false, _) => Ok(CrdLayout::Own),
        (true, Some(l)) => Ok(l),
        (true, None) => Err(
            a.bad("`aos` needs a run of levels: compressed(aos) followed by singleton(aos) levels")
        ),
    }
}

fn compressed(a: &LevelArgs) -> Result<Arc<dyn LevelFormat>, FormatError> {
    a.only(&["full", "nonunique", "unique", "unordered", "ordered", "aos"])?;
    let (ordered, unique) = a.order_unique();
    Ok(Arc::new(Compressed {
        full: a.has("full"),
        ordered,
        unique,
        layout: layout(a)?,
    }))
}

fn singleton(a: &LevelArgs) -> Result<Arc<dyn LevelFormat>, FormatError> {
    a.only(&[
        "full",
        "nonunique",
        "unique",
        "unordered",
        "ordered",
        "aos",
        "padded",
    ])?;
    let (ordered, unique) = a.order_unique();
    if a.has("padded") && (a.has("aos") || a.has("full")) {
        return Err(a.bad("a padded singleton stores its own coordinates and is not full: `padded` excludes `aos` and `full`"));
    }
    Ok(Arc::new(Singleton {
        full: a.has("full"),
        ordered,
        unique,
        layout: layout(a)?,
        padded: a.has("padded"),
    }))
}

fn range(a: &LevelArgs) -> Result<Arc<dyn LevelFormat>, FormatError> {
    a.only(&["nonunique", "unique", "unordered", "ordered"])?;
    let (ordered, unique) = a.order_unique();
    Ok(Arc::new(Range { ordered, unique }))
}

fn offset(a: &LevelArgs) -> Result<Arc<dyn LevelFormat>, FormatError> {
    a.only(&["nonunique", "unique", "unordered", "ordered"])?;
    let (ordered, unique) = a.order_unique();
    Ok(Arc::new(Offset { ordered, unique }))
}

fn hashed(a: &LevelArgs) -> Result<Arc<dyn LevelFormat>, FormatError> {
    a.only(&["full", "nonunique", "unique", "unordered", "ordered", "W"])?;
    if a.has("ordered") {
        return Err(a.bad("a hashed level stores coordinates in hash order: it cannot be ordered"));
    }
    let width = match a.setting("W") {
        None => None,
        Some(w) => match w.parse::<usize>() {
            Ok(0) | Err(_) => return Err(a.bad(format!("W={w} must be a positive integer"))),
            Ok(w) if w > i32::MAX as usize => {
                return Err(a.bad(format!("W={w} is above {} (32-bit positions)", i32::MAX)))
            }
            Ok(w) => Some(w),
        },
    };
    Ok(Arc::new(Hashed {
        full: a.has("full"),
        unique: !a.has("nonunique"),
        width,
    }))
}
