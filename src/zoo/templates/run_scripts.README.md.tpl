# @NAME@ run scripts

`run_@name@.py` is the model's unified run interface: it prints the command
it runs, then starts `--nproc_per_node` workers of `../train.py` on this node.

```
cd <model dir>
python run_scripts/run_@name@.py --model_name @name@ --nproc_per_node 2 --batch_size 32 \
    --epoch 1 --step 10 --lr 0.05 --device cpu --autocast false --dataset_path none
```

| argument | meaning | default |
|---|---|---|
| `--model_name` | model to train | @name@ |
| `--batch_size` | batch size per worker | 32 |
| `--epoch` | epochs | 1 |
| `--step` | steps per epoch, for short functional runs (-1: the whole epoch) | -1 |
| `--dataset_path` | data set folder | (none) |
| `--lr` | learning rate | 0.05 |
| `--device` | cpu, cuda, sdaa, ... | cpu |
| `--autocast` | mixed precision (true/false) | false |
| `--nproc_per_node` | workers on this node (single-node DDP) | 1 |
| `--nnode` | nodes (`--nnodes` also accepted) | 1 |
| `--node_rank` | this node's index | 0 |
| `--master_addr` | rank 0's address | 127.0.0.1 |
| `--master_port` | rank 0's port (0: a free one on one node) | 0 |

Any other `--key value` is passed on to `train.py`. Every worker prints its
loss and throughput per step as tcap_dllogger lines
(`TCAPPDLL {... "data": "{'rank': '0', 'train.loss': '...', 'train.ips': '...'}"}`).
