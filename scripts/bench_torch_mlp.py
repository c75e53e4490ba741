"""PyTorch reference for scripts/bench-train: the same 784-1024-1024-10 MLP, SGD, one process,
synthetic data, fp32 on the CPU. Prints the median samples/s over several timed windows."""
import statistics
import sys
import time

import torch

batch, threads, steps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                            torch.nn.ReLU(), torch.nn.Linear(1024, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x = torch.rand(batch, 784)
y = torch.randint(0, 10, (batch,))
loss_fn = torch.nn.CrossEntropyLoss()


def step():
    opt.zero_grad(set_to_none=True)
    loss_fn(model(x), y).backward()
    opt.step()


for _ in range(10):
    step()
rates = []
for _ in range(5):
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    rates.append(batch * steps / (time.perf_counter() - t0))
print(f"{statistics.median(rates):.0f}")
