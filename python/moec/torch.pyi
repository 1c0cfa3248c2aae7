# Type hints of moec.torch (python/moec/torch.py).
from typing import Callable, Optional, Tuple

import torch

def moe_init_routing_v2_grad(grad_expanded_x: torch.Tensor, expanded_row_idx: torch.Tensor, top_k: int,
                             drop_pad_mode: int = 0, active_num: int = 0) -> torch.Tensor: ...
def moe_token_unpermute_with_routing_map_grad(
        unpermuted_tokens_grad: torch.Tensor, out_index: torch.Tensor, permute_token_id: torch.Tensor,
        routing_map: Optional[torch.Tensor] = None, permuted_tokens: Optional[torch.Tensor] = None,
        probs: Optional[torch.Tensor] = None, drop_and_pad: bool = False,
        num_experts: Optional[int] = None) -> Tuple[torch.Tensor, Optional[torch.Tensor]]: ...
def moe_unpermute(hidden_states_unzipped: torch.Tensor, zipped_expertwise_rowmap: torch.Tensor,
                  expert_routemap_topk: torch.Tensor, token_prob_unzipped: torch.Tensor,
                  total_zipped_tokens: int = -1, num_experts: int = -1, using_mix_precision: bool = True,
                  using_weighted_combine: bool = False,
                  paddle_single_row_copy: bool = False) -> Tuple[torch.Tensor, torch.Tensor]: ...
def _paired(name: str, forward: Callable, backward: Callable, differentiable: Tuple[int, ...]) -> Callable: ...
