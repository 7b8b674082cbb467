# Never mentions the function's name: found through the aliases mypkg binds.
from mypkg import attention
import mypkg.backend as backend


def decode(q, k, v):
    attention(q, k, v)  # call: mate
    backend.attention(q, k, v)  # call: mate
