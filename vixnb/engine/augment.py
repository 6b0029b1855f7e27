"""The augmentations of training batches, on the batch's device: RandAugment (paper `cxv`), and the blog's flips
and rotations (paper `shaped`), drawn from a run's own generator (``augment_generator``) so that a resumed run,
or an ensemble member, draws exactly what its separate run draws."""
import torch
import torch.nn.functional as F


def augment_batch(images, randaugment):
    """RandAugment (torchvision), drawn independently per image, on uint8 images where they are.
    ``randaugment`` = [num_ops, magnitude]; paper `cxv` writes them as M and N, swapped (notes section 3b)."""
    if not randaugment:
        return images
    from torchvision.transforms import v2  # torchvision loads torch._dynamo (~2 s a process): only RandAugment needs it
    ra = v2.RandAugment(num_ops=randaugment[0], magnitude=randaugment[1])
    return torch.stack([ra(img) for img in images])


def rotate_batch(images, angles):
    """Each image of a uint8 (b, c, h, w) batch rotated by its own angle (``angles``, degrees; positive is
    counter-clockwise) about its centre as torchvision's ``rotate`` does it: nearest pixel, zero fill, same size."""
    rad = torch.deg2rad(angles.double())
    cos, sin, zero = rad.cos(), rad.sin(), torch.zeros_like(rad)
    h, w = images.shape[-2:]
    # torchvision's inverse map in pixels about the centre, [[cos, -sin], [sin, cos]], in affine_grid's [-1, 1] units
    theta = torch.stack([torch.stack([cos, -sin * h / w, zero], -1), torch.stack([sin * w / h, cos, zero], -1)], -2)
    grid = F.affine_grid(theta.float(), list(images.shape), align_corners=False)
    out = F.grid_sample(images.float(), grid, mode="nearest", padding_mode="zeros", align_corners=False)
    return out.to(torch.uint8)


AUGMENT_SEED_OFFSET = 1_000_003  # a run's augmentation generator is seeded with its seed plus this


def flip_rotate_draws(count, generator, device):
    """The blog's augmentation's random numbers for ``count`` images, from ``generator`` (on ``device``): a (3, count)
    tensor, the same three per image whatever is on (``flip_rotate``)."""
    return torch.rand(3, count, generator=generator, device=device, dtype=torch.float32)  # whatever the default type


def apply_flip_rotate(images, draws, *, hflip, vflip, rotate):
    """The blog's augmentation of uint8 ``images`` (..., c, h, w; leading dimensions: an ensemble's members) by their
    ``draws`` (3, ...: ``flip_rotate_draws`` per member, stacked on dimension 1), every image at once: flipped
    horizontally where its first draw is < 0.5, vertically where its second is, rotated by (2 * third - 1) * rotate
    degrees (``rotate_batch``)."""
    lead, shape = images.shape[:-3], images.shape[-3:]
    images, draws = images.reshape(-1, *shape), draws.reshape(3, -1)
    for on, heads, dim in ((hflip, draws[0], -1), (vflip, draws[1], -2)):
        if on:
            images = torch.where((heads < 0.5)[:, None, None, None], images.flip(dim), images)
    images = rotate_batch(images, (2 * draws[2] - 1) * rotate) if rotate else images
    return images.reshape(*lead, *shape)


def flip_rotate(images, *, hflip, vflip, rotate, generator):
    """The blog's augmentation of a uint8 (b, c, h, w) batch, on its device, for all images at once: each image
    flipped horizontally (p=0.5), vertically (p=0.5) and rotated by its own angle uniform in [-rotate, rotate]
    degrees (``rotate_batch``), as torchvision's RandomHorizontalFlip, RandomVerticalFlip and RandomRotation.
    Every draw comes from ``generator`` (on the images' device): the same three per image whatever is on."""
    draws = flip_rotate_draws(len(images), generator, images.device)
    return apply_flip_rotate(images, draws, hflip=hflip, vflip=vflip, rotate=rotate)


def augment_generator(seed, device):
    """A run's augmentation generator: seeded from the run's seed, but not the data order's stream."""
    return torch.Generator(device=device).manual_seed(seed + AUGMENT_SEED_OFFSET)
