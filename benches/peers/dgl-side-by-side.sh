#!/usr/bin/env bash
# Mini-batch GraphSAGE, DGL 2.1 against Halo, back to back on one graph, ROUNDS times, so both
# see the same machine load (compare the ratio within a round). Set-up of DGL: the header of
# ../shared/peers/dgl_minibatch.py (a venv; point PYTHON at its interpreter).
#
#   PYTHON=/tmp/dgl/bin/python HALO=target/release/halo benches/peers/dgl-side-by-side.sh OUT_DIR
set -euo pipefail
out=${1:?usage: dgl-side-by-side.sh OUT_DIR}
python=${PYTHON:-python3}
halo=${HALO:-target/release/halo}
rounds=${ROUNDS:-2}
peer="$(dirname "${BASH_SOURCE[0]}")/../../../shared/peers/dgl_minibatch.py"
data="$out/synth100k"
mkdir -p "$out"
[[ -d $data ]] || "$halo" datasets synth --nodes 100000 --avg-degree 20 --features 128 --classes 16 --out "$data"
load() { cut -d' ' -f1-3 /proc/loadavg; }
for round in $(seq 1 "$rounds"); do
    echo "round $round: dgl (load $(load))"
    "$python" "$peer" "$data" --epochs 3 >"$out/dgl_$round.json"
    echo "round $round: halo (load $(load))"
    "$halo" train --dataset "$data" --model sage --layers 3 --hidden 256 --batch-size 1024 --fanouts 15,10,5 \
        --lr 0.003 --weight-decay 0 --dropout 0.5 --epochs 3 --report "$out/halo_$round.json" -q
done
echo "reports in $out (dgl_<round>.json: epoch_median_s; halo_<round>.json: epochs[].wall_s)"
