"""What gets trained and how: the Trainer loop, models, data, optimizers, the flat kvstore, recompute, precision."""
