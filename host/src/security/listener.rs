//! Listener definitions: `--listener NAME=PROTOCOL://HOST:PORT`, Kafka's
//! four security protocols, and what each one requires.

use std::fmt;

/// Kafka's `security.protocol` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl Protocol {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "PLAINTEXT" => Protocol::Plaintext,
            "SSL" => Protocol::Ssl,
            "SASL_PLAINTEXT" => Protocol::SaslPlaintext,
            "SASL_SSL" => Protocol::SaslSsl,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Protocol::Plaintext => "PLAINTEXT",
            Protocol::Ssl => "SSL",
            Protocol::SaslPlaintext => "SASL_PLAINTEXT",
            Protocol::SaslSsl => "SASL_SSL",
        }
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, Protocol::Ssl | Protocol::SaslSsl)
    }

    pub fn uses_sasl(self) -> bool {
        matches!(self, Protocol::SaslPlaintext | Protocol::SaslSsl)
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One `--listener` flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSpec {
    pub name: String,
    pub protocol: Protocol,
    /// `HOST:PORT` to bind.
    pub addr: String,
}

impl ListenerSpec {
    /// Parses `NAME=PROTOCOL://HOST:PORT`; `PROTOCOL://HOST:PORT` alone
    /// names the listener after its protocol.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (name, rest) = match s.split_once('=') {
            Some((n, r)) => (n.to_owned(), r),
            None => (String::new(), s),
        };
        let (proto, addr) = rest
            .split_once("://")
            .ok_or_else(|| format!("listener {s:?}: expected NAME=PROTOCOL://HOST:PORT"))?;
        let protocol = Protocol::parse(proto).ok_or_else(|| {
            format!(
                "listener {s:?}: unknown protocol {proto:?} (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)"
            )
        })?;
        let name = if name.is_empty() {
            protocol.name().to_owned()
        } else {
            name
        };
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!(
                "listener {s:?}: a name is letters, digits, '_' and '-'"
            ));
        }
        if addr
            .rsplit_once(':')
            .is_none_or(|(_, p)| p.parse::<u16>().is_err())
        {
            return Err(format!("listener {s:?}: expected HOST:PORT after ://"));
        }
        Ok(ListenerSpec {
            name,
            protocol,
            addr: addr.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listener_flags_parse_with_and_without_a_name() {
        let l = ListenerSpec::parse("CLIENT=SASL_SSL://127.0.0.1:9093").unwrap();
        assert_eq!(l.name, "CLIENT");
        assert_eq!(l.protocol, Protocol::SaslSsl);
        assert_eq!(l.addr, "127.0.0.1:9093");
        let l = ListenerSpec::parse("PLAINTEXT://0.0.0.0:9092").unwrap();
        assert_eq!(l.name, "PLAINTEXT");
        for bad in ["X=TLS://h:1", "X=SSL://h", "X=SSL:/h:1", "a b=SSL://h:1"] {
            assert!(ListenerSpec::parse(bad).is_err(), "{bad}");
        }
    }
}
