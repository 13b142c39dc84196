//! Encode and decode with a codec: `SkipRepeats` over the exact codec sends only the rows the
//! receiver does not hold yet, and both ends stay bit-identical.
//!
//!     cargo run -p cache-quant --example codec

use std::sync::Arc;

use cache_quant::{Codec, Direction, IdentityCodec, Pass, Route, Side, SkipRepeats, Step, Stream, StreamId, Tag};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let factory = SkipRepeats::over(Arc::new(|_: &Stream| Box::new(IdentityCodec) as Box<dyn Codec>));
    let stream = |side| Stream {
        id: StreamId { tag: Tag::new(0, Direction::Forward, Step::Halo), route: Route::ToCopies, peer: 1, side },
        rows: Arc::from([10u32, 11, 12]),
    };
    let (mut sender, mut receiver) = (factory(&stream(Side::Encode)), factory(&stream(Side::Decode)));
    let width = 4;
    let mut rows: Vec<f32> = (0..3 * width).map(|i| i as f32).collect();
    let mut decoded = vec![0.0f32; rows.len()];
    for epoch in 1..=3 {
        if epoch == 3 {
            rows[width] += 1.0; // only row 11 changes
        }
        let mut message = Vec::new();
        sender.encode(Pass::train(epoch, 0), &rows, width, &mut message)?;
        receiver.decode(Pass::train(epoch, 0), &message, width, &mut decoded)?;
        assert_eq!(decoded, rows, "the receiver holds exactly what was sent");
        let stats = sender.take_stats();
        println!(
            "epoch {epoch}: {} bytes for 3 rows of {width} floats, {} rows skipped",
            message.len(),
            stats.rows_skipped
        );
    }
    println!("codec: {}", sender.name());
    Ok(())
}
