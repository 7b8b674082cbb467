"""A stand-in for the parts of SGLang the porter loop test needs (its FA3/FA4 dispatcher)."""
