//! Fanouts: how many in-neighbours each layer samples per destination vertex.
//!
//! The text form is DGL's and PyG's: one integer per layer, comma separated, ordered from the
//! input layer to the output layer, `-1` meaning every neighbour (`"10,25"`, `"15,10,5"`, `"-1"`).

use std::fmt;
use std::num::NonZeroU32;
use std::str::FromStr;

/// One layer's fanout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fanout {
    /// Every in-neighbour (written `-1`).
    All,
    /// At most this many in-neighbours, drawn uniformly without replacement.
    Take(NonZeroU32),
}

impl Fanout {
    /// Reads the integer form: `-1` is [`Fanout::All`], a positive value is [`Fanout::Take`].
    /// `position` (1-based) only names the entry in the error.
    pub fn from_int(value: i64, position: usize) -> Result<Self, FanoutError> {
        if value == -1 {
            return Ok(Self::All);
        }
        u32::try_from(value)
            .ok()
            .and_then(NonZeroU32::new)
            .map(Self::Take)
            .ok_or(FanoutError::OutOfRange { position, value })
    }

    /// The number of neighbours a destination with `degree` in-neighbours keeps.
    pub fn limit(self, degree: usize) -> usize {
        match self {
            Self::All => degree,
            Self::Take(n) => degree.min(n.get() as usize),
        }
    }
}

impl fmt::Display for Fanout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::All => f.write_str("-1"),
            Self::Take(n) => write!(f, "{n}"),
        }
    }
}

/// Why a fanout list was rejected. Positions are 1-based, counted from the input layer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FanoutError {
    #[error("no fanouts given: expected one per layer, e.g. \"10,25\" or \"-1\"")]
    Empty,
    #[error("fanout {position} ({text:?}) is not an integer: expected a positive integer or -1 (all neighbours)")]
    NotInteger { position: usize, text: String },
    #[error("fanout {position} is {value}: expected an integer in 1..=4294967295, or -1 (all neighbours)")]
    OutOfRange { position: usize, value: i64 },
}

/// One fanout per layer, ordered from the input layer to the output layer (as DGL's
/// `NeighborSampler(fanouts)`): `fanouts[l]` is the fanout of block `l` of a
/// [`MiniBatch`](super::MiniBatch). Never empty.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fanouts(Vec<Fanout>);

impl Fanouts {
    /// Wraps per-layer fanouts (input layer first); fails when there are none.
    pub fn new(layers: Vec<Fanout>) -> Result<Self, FanoutError> {
        if layers.is_empty() {
            return Err(FanoutError::Empty);
        }
        Ok(Self(layers))
    }

    /// Reads the integer form (`[10, 25]`, `[-1]`), e.g. from a TOML array.
    pub fn from_ints(values: &[i64]) -> Result<Self, FanoutError> {
        let layers = values.iter().enumerate().map(|(i, &v)| Fanout::from_int(v, i + 1)).collect::<Result<_, _>>()?;
        Self::new(layers)
    }

    /// Number of layers (blocks) a sample has.
    pub fn num_layers(&self) -> usize {
        self.0.len()
    }

    /// Per-layer fanouts, input layer first.
    pub fn as_slice(&self) -> &[Fanout] {
        &self.0
    }
}

impl FromStr for Fanouts {
    type Err = FanoutError;

    /// Parses `"10,25"`; spaces around entries are allowed.
    fn from_str(text: &str) -> Result<Self, FanoutError> {
        if text.trim().is_empty() {
            return Err(FanoutError::Empty);
        }
        let layers = text
            .split(',')
            .enumerate()
            .map(|(i, entry)| {
                let entry = entry.trim();
                let value = entry
                    .parse::<i64>()
                    .map_err(|_| FanoutError::NotInteger { position: i + 1, text: entry.to_string() })?;
                Fanout::from_int(value, i + 1)
            })
            .collect::<Result<_, _>>()?;
        Self::new(layers)
    }
}

impl fmt::Display for Fanouts {
    /// The text form [`Fanouts::from_str`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, fanout) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{fanout}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(n: u32) -> Fanout {
        Fanout::Take(NonZeroU32::new(n).unwrap())
    }

    #[test]
    fn parses_lists_and_all() {
        assert_eq!("10,25".parse::<Fanouts>().unwrap().as_slice(), &[take(10), take(25)]);
        assert_eq!(" 15, 10 ,5 ".parse::<Fanouts>().unwrap().as_slice(), &[take(15), take(10), take(5)]);
        assert_eq!("-1".parse::<Fanouts>().unwrap().as_slice(), &[Fanout::All]);
        assert_eq!("5,-1".parse::<Fanouts>().unwrap().num_layers(), 2);
        let fanouts: Fanouts = "15,-1,5".parse().unwrap();
        assert_eq!(fanouts.to_string().parse::<Fanouts>().unwrap(), fanouts);
        assert_eq!(Fanouts::from_ints(&[15, -1, 5]).unwrap(), fanouts);
    }

    #[test]
    fn rejects_bad_entries_by_position() {
        assert_eq!("".parse::<Fanouts>(), Err(FanoutError::Empty));
        assert_eq!(Fanouts::from_ints(&[]), Err(FanoutError::Empty));
        assert_eq!("10,,5".parse::<Fanouts>(), Err(FanoutError::NotInteger { position: 2, text: String::new() }));
        assert_eq!("10,x".parse::<Fanouts>(), Err(FanoutError::NotInteger { position: 2, text: "x".into() }));
        assert_eq!("0".parse::<Fanouts>(), Err(FanoutError::OutOfRange { position: 1, value: 0 }));
        assert_eq!("5,-2".parse::<Fanouts>(), Err(FanoutError::OutOfRange { position: 2, value: -2 }));
        assert_eq!("5000000000".parse::<Fanouts>(), Err(FanoutError::OutOfRange { position: 1, value: 5_000_000_000 }));
        let message = "10,x".parse::<Fanouts>().unwrap_err().to_string();
        assert_eq!(message, "fanout 2 (\"x\") is not an integer: expected a positive integer or -1 (all neighbours)");
    }

    #[test]
    fn limit_caps_at_degree() {
        assert_eq!(take(3).limit(10), 3);
        assert_eq!(take(30).limit(10), 10);
        assert_eq!(Fanout::All.limit(10), 10);
        assert_eq!(take(3).limit(0), 0);
    }
}
