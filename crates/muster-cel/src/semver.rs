//! Semantic versions as Kubernetes' CEL semver library and DRA `version` attributes read them
//! (blang/semver v4: strict SemVer 2.0, with an optional normalizing parse).

use std::cmp::Ordering;
use std::fmt;

/// A parsed semantic version. Ordering is SemVer 2.0 precedence: build metadata is ignored.
#[derive(Clone, Debug, Eq)]
pub struct Semver {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    pub pre: Vec<PreRelease>,
    pub build: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PreRelease {
    Numeric(u64),
    Alpha(String),
}

impl PartialEq for Semver {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl PartialOrd for Semver {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Semver {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch).cmp(&(other.major, other.minor, other.patch)).then_with(|| {
            match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => {
                    for (a, b) in self.pre.iter().zip(&other.pre) {
                        let c = match (a, b) {
                            (PreRelease::Numeric(x), PreRelease::Numeric(y)) => x.cmp(y),
                            (PreRelease::Numeric(_), PreRelease::Alpha(_)) => Ordering::Less,
                            (PreRelease::Alpha(_), PreRelease::Numeric(_)) => Ordering::Greater,
                            (PreRelease::Alpha(x), PreRelease::Alpha(y)) => x.cmp(y),
                        };
                        if c != Ordering::Equal {
                            return c;
                        }
                    }
                    self.pre.len().cmp(&other.pre.len())
                }
            }
        })
    }
}

impl fmt::Display for Semver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        for (i, p) in self.pre.iter().enumerate() {
            f.write_str(if i == 0 { "-" } else { "." })?;
            match p {
                PreRelease::Numeric(n) => write!(f, "{n}")?,
                PreRelease::Alpha(s) => f.write_str(s)?,
            }
        }
        for (i, b) in self.build.iter().enumerate() {
            f.write_str(if i == 0 { "+" } else { "." })?;
            f.write_str(b)?;
        }
        Ok(())
    }
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-'
}

fn numeric(s: &str, what: &str) -> Result<u64, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("Invalid character(s) found in {what} number {s:?}"));
    }
    if s.len() > 1 && s.starts_with('0') {
        return Err(format!("{} number must not contain leading zeroes {s:?}", capitalize(what)));
    }
    s.parse().map_err(|_| format!("{} number is too large {s:?}", capitalize(what)))
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next().map_or_else(String::new, |f| f.to_uppercase().chain(c).collect())
}

impl Semver {
    /// Strict SemVer 2.0 (`semver.Parse`): `MAJOR.MINOR.PATCH[-pre][+build]`, no leading zeros.
    pub fn parse(s: &str) -> Result<Semver, String> {
        if s.is_empty() {
            return Err("Version string empty".into());
        }
        let (rest, build) = match s.split_once('+') {
            Some((r, b)) => (r, Some(b)),
            None => (s, None),
        };
        let (core, pre) = match rest.split_once('-') {
            Some((c, p)) => (c, Some(p)),
            None => (rest, None),
        };
        let parts: Vec<&str> = core.split('.').collect();
        if parts.len() != 3 {
            return Err("No Major.Minor.Patch elements found".into());
        }
        let major = numeric(parts[0], "major")?;
        let minor = numeric(parts[1], "minor")?;
        let patch = numeric(parts[2], "patch")?;
        let mut v = Semver { major, minor, patch, pre: Vec::new(), build: Vec::new() };
        if let Some(pre) = pre {
            for id in pre.split('.') {
                if id.is_empty() {
                    return Err("Prerelease is empty".into());
                }
                if !id.chars().all(is_ident_char) {
                    return Err(format!("Invalid character(s) found in prerelease {id:?}"));
                }
                if id.bytes().all(|b| b.is_ascii_digit()) {
                    if id.len() > 1 && id.starts_with('0') {
                        return Err(format!("Prerelease version number must not contain leading zeroes {id:?}"));
                    }
                    v.pre.push(PreRelease::Numeric(
                        id.parse().map_err(|_| format!("Prerelease number too large {id:?}"))?,
                    ));
                } else {
                    v.pre.push(PreRelease::Alpha(id.to_string()));
                }
            }
        }
        if let Some(build) = build {
            for id in build.split('.') {
                if id.is_empty() {
                    return Err("Build meta data is empty".into());
                }
                if !id.chars().all(is_ident_char) {
                    return Err(format!("Invalid character(s) found in build meta data {id:?}"));
                }
                v.build.push(id.to_string());
            }
        }
        Ok(v)
    }

    /// `semver(s, true)`: strips a leading `v`, fills a missing minor or patch with 0, and drops
    /// leading zeros from the numeric core parts before the strict parse.
    pub fn parse_normalized(s: &str) -> Result<Semver, String> {
        let s = s.strip_prefix('v').unwrap_or(s);
        let (core, suffix) = match s.find(['-', '+']) {
            Some(i) => (&s[..i], &s[i..]),
            None => (s, ""),
        };
        let mut parts: Vec<String> = core
            .split('.')
            .map(|p| {
                let t = p.trim_start_matches('0');
                if t.is_empty() && !p.is_empty() { "0".to_string() } else { t.to_string() }
            })
            .collect();
        while parts.len() < 3 {
            parts.push("0".into());
        }
        Semver::parse(&format!("{}{suffix}", parts.join(".")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Semver {
        Semver::parse(s).unwrap()
    }

    #[test]
    fn precedence_follows_semver_2() {
        let order = [
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta",
            "1.0.0-beta.2",
            "1.0.0-beta.11",
            "1.0.0-rc.1",
            "1.0.0",
            "1.0.1",
            "1.10.0",
            "2.0.0",
        ];
        for w in order.windows(2) {
            assert!(v(w[0]) < v(w[1]), "{} < {}", w[0], w[1]);
        }
        assert_eq!(v("1.0.0+build.1"), v("1.0.0+other"), "build metadata does not count");
        assert_eq!(v("550.54.15").to_string(), "550.54.15");
    }

    #[test]
    fn strict_parse_rejects() {
        for bad in [
            "", "1", "1.2", "v1.2.3", "01.2.3", "1.02.3", "1.2.3-", "1.2.3-01", "1.2.3+", "1.2.3.4", "a.b.c",
            "1.2.3-a$",
        ] {
            assert!(Semver::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn normalized_parse() {
        assert_eq!(Semver::parse_normalized("v1.2").unwrap().to_string(), "1.2.0");
        assert_eq!(Semver::parse_normalized("01.002.3").unwrap().to_string(), "1.2.3");
        assert_eq!(Semver::parse_normalized("2").unwrap().to_string(), "2.0.0");
        assert_eq!(Semver::parse_normalized("v1.0.0-rc.1").unwrap().to_string(), "1.0.0-rc.1");
    }
}
