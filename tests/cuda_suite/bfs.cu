// Level-synchronous breadth-first search over a CSR graph, in the two-kernel style of the
// classic GPU BFS: expand the frontier, then commit the next frontier.
#include "common.h"

struct Graph { int begin; int degree; };

__global__ void bfs_expand(const Graph* nodes, const int* edges, bool* frontier, bool* next,
                           const bool* visited, int* cost, int n) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n || !frontier[v]) return;
    frontier[v] = false;
    Graph g = nodes[v];
    for (int e = g.begin; e < g.begin + g.degree; e++) {
        int u = edges[e];
        if (!visited[u]) {
            cost[u] = cost[v] + 1;       // every writer of u writes the same level
            next[u] = true;
        }
    }
}

__global__ void bfs_commit(bool* frontier, bool* next, bool* visited, int* changed, int n) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n || !next[v]) return;
    frontier[v] = true;
    visited[v] = true;
    next[v] = false;
    atomicOr(changed, 1);
}
