//! Splitting a campaign over CI runners with nextest's `--partition` semantics: `count:I/N` deals
//! the cases out round-robin by position, `hash:I/N` puts a case on the shard its key's 64-bit
//! xxHash (seed 0) picks. Either way the N shards are disjoint and together hold every case once,
//! and a case's shard depends only on its position or key, never on the machine.

use std::fmt;
use std::str::FromStr;

/// How cases are dealt to shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// Case `i` goes to shard `i mod N + 1`.
    Count,
    /// A case goes to shard `xxh64(key) mod N + 1`: it stays on its shard when cases are added or
    /// removed around it.
    Hash,
}

/// Shard `shard` of `total` (1-based, as on the command line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partition {
    pub scheme: Scheme,
    pub shard: u64,
    pub total: u64,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PartitionError {
    #[error("a partition is `count:I/N` or `hash:I/N`, not `{0}`")]
    Syntax(String),
    #[error("partition `{0}`: the shard I must be between 1 and N")]
    ShardOutOfRange(String),
}

impl Partition {
    /// Whether this shard holds the case at `position` (counted from 0 in its list) whose stable
    /// key is `key`.
    pub fn selects(&self, position: usize, key: &str) -> bool {
        let slot = match self.scheme {
            Scheme::Count => position as u64 % self.total,
            Scheme::Hash => xxhash_rust::xxh64::xxh64(key.as_bytes(), 0) % self.total,
        };
        slot + 1 == self.shard
    }

    /// Whether `self` and `other` split the same way (and so can be merged).
    pub fn same_split(&self, other: &Partition) -> bool {
        self.scheme == other.scheme && self.total == other.total
    }
}

impl FromStr for Partition {
    type Err = PartitionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let syntax = || PartitionError::Syntax(text.to_string());
        let (scheme, shards) = text.split_once(':').ok_or_else(syntax)?;
        let scheme = match scheme {
            "count" => Scheme::Count,
            "hash" => Scheme::Hash,
            _ => return Err(syntax()),
        };
        let (shard, total) = shards.split_once('/').ok_or_else(syntax)?;
        let number = |n: &str| {
            // Digits only: u64's parser would also take a leading `+`.
            if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                return Err(syntax());
            }
            n.parse::<u64>().map_err(|_| syntax())
        };
        let (shard, total) = (number(shard)?, number(total)?);
        if shard == 0 || shard > total {
            return Err(PartitionError::ShardOutOfRange(text.to_string()));
        }
        Ok(Partition {
            scheme,
            shard,
            total,
        })
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = match self.scheme {
            Scheme::Count => "count",
            Scheme::Hash => "hash",
        };
        write!(f, "{scheme}:{}/{}", self.shard, self.total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_both_schemes() {
        for text in ["count:1/1", "count:2/4", "hash:3/3", "hash:10/12"] {
            assert_eq!(text.parse::<Partition>().unwrap().to_string(), text);
        }
        assert_eq!(
            "hash:2/5".parse::<Partition>().unwrap(),
            Partition {
                scheme: Scheme::Hash,
                shard: 2,
                total: 5
            }
        );
    }

    #[test]
    fn malformed_partitions_say_what_is_expected() {
        for text in [
            "",
            "count",
            "count:1",
            "slice:1/2",
            "count:a/2",
            "count:+1/2",
            "count:1/",
        ] {
            assert_eq!(
                text.parse::<Partition>().unwrap_err().to_string(),
                format!("a partition is `count:I/N` or `hash:I/N`, not `{text}`")
            );
        }
        for text in ["count:0/2", "hash:3/2", "count:0/0"] {
            assert_eq!(
                text.parse::<Partition>(),
                Err(PartitionError::ShardOutOfRange(text.into()))
            );
        }
    }

    #[test]
    fn count_deals_round_robin() {
        let second = "count:2/3".parse::<Partition>().unwrap();
        let picked: Vec<usize> = (0..10).filter(|&i| second.selects(i, "ignored")).collect();
        assert_eq!(picked, [1, 4, 7]);
    }

    #[test]
    fn hash_follows_xxh64_of_the_key() {
        // xxh64("", 0) is 0xEF46DB3751D8E999 (the reference implementation's test vector):
        // 17241709254077376921 mod 4 is 1, so the empty key lands on shard 2 of 4.
        let shard = |i| Partition {
            scheme: Scheme::Hash,
            shard: i,
            total: 4,
        };
        let holders: Vec<u64> = (1..=4).filter(|&i| shard(i).selects(0, "")).collect();
        assert_eq!(holders, [2]);
    }
}
