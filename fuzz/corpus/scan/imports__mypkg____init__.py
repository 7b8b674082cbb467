from .backend import attention
