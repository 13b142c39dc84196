//! Train a model from gnn-core directly, without the trainer: PyG's 2-layer GCN on Cora,
//! full-batch, with Adam; then its test accuracy.
//!
//!     cargo run -p gnn-core --example train --release

use std::path::Path;

use gnn_core::{Adam, AggGraph, ForwardCtx, Model, ModelConfig, NoExchange, count_correct, softmax_cross_entropy};
use graph_partition::{CacheMode, Dataset, Labels, LoadOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/cora"));
    let dataset = Dataset::load(dir, &LoadOptions { cache: CacheMode::Off, ..LoadOptions::default() })?;
    let Labels::Classes(classes) = &dataset.labels else { return Err("Cora has one class per vertex".into()) };
    let (train, test) = (&dataset.splits.train, &dataset.splits.test);

    let graph = AggGraph::single(&dataset.graph)?;
    let mut model = Model::new(ModelConfig::gcn(dataset.num_features(), 16, dataset.num_classes))?;
    let mut adam = Adam::new(0.01, 5e-4);
    for epoch in 1..=100 {
        model.zero_grad();
        let logits = model.forward(&graph, &dataset.features, &mut NoExchange, ForwardCtx::train(0, epoch))?;
        let (loss_sum, mut grad) = softmax_cross_entropy(logits, classes, train)?;
        grad /= train.len() as f32; // the mean loss over the training vertices
        model.backward(&graph, grad, &mut NoExchange)?;
        model.step(&mut adam)?;
        if epoch % 20 == 0 {
            println!("epoch {epoch}: loss {:.4}", loss_sum / train.len() as f64);
        }
    }
    let logits = model.forward(&graph, &dataset.features, &mut NoExchange, ForwardCtx::eval())?;
    let correct = count_correct(logits, classes, test)?;
    println!("test accuracy {:.4} ({correct} of {})", correct as f64 / test.len() as f64, test.len());
    Ok(())
}
