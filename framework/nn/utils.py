"""nn utilities, where torch keeps them: clip_grad_norm_ (the same function as framework.optim.clip_grad_norm_)."""
from ..optim.clip import clip_grad_norm_

__all__ = ["clip_grad_norm_"]
