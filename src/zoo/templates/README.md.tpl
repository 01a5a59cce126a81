# @NAME@

What the model is, where it comes from, and what it was adapted for.

## Requirements

`pip install -r requirements.txt`

## Data

Where the data set comes from and how `--dataset_path` finds it.

## Training

```
cd <this folder>
python run_scripts/run_@name@.py --model_name @name@ --nproc_per_node 2 --batch_size 32 \
    --epoch 1 --step 10 --lr 0.05 --device cpu --autocast false --dataset_path none
```

The arguments are in `run_scripts/README.md`. Each worker prints
`train.loss` and `train.ips` per step (tcap_dllogger lines).

## Precision

The loss curve against the CUDA reference of the same seed, relative error
at most 1% (`trainctl compare CUDA_JOB THIS_JOB`).
