"""ResNet-18 and ResNet-34 (He et al.) in their CIFAR form, the `cxv` paper's convolutional baselines (Table 1).

Built from torchvision's ``ResNet`` with ``BasicBlock`` (stages of 64, 128, 256, 512 channels; [2, 2, 2, 2] and
[3, 4, 6, 3] blocks), with the usual CIFAR stem: the 7 x 7 stride-2 ``conv1`` becomes a 3 x 3 conv of stride
image_size / 32 (1 on CIFAR, 2 on Tiny ImageNet, the paper's "stride of the initial convolution layer", so the
first map is 32 x 32 on both), and the max-pool is removed (``nn.Identity``).

The paper gives no other detail and the authors' repositories hold no ResNet script. Its "A dropout of 0.5 was
used across all models" is applied where a ResNet has room for it: the classifier ``fc`` is ``Dropout(0.5)`` then
the Linear (no parameters, so the counts and MACs below are the plain CIFAR ResNet's); ``dropout=0`` gives the
plain ResNet.

Counts on CIFAR-10 (paper convention = true count; BatchNorm statistics are buffers): ResNet-18 11,173,962
(Table 1: 11.2 M), ResNet-34 21,282,122 (21.3 M). MACs of the convs and the Linear: 0.556 G (0.56 G) and
1.159 G (1.16 G).

``depth`` overrides the blocks per stage: an int n gives [n, n, n, n] (``depth=1``, the smoke profile, gives one
block per stage), a list gives the four stages' counts.
"""
from torch import nn

from ..layers.stems import GRID_SIDE
from .registry import register_model


def resnet_cifar(layers, *, image_size, num_classes, channels=3, depth=None, dropout=0.5):
    """A torchvision ``ResNet`` of ``BasicBlock`` stages ``layers`` with the CIFAR stem."""
    # imported here: torchvision loads torch._dynamo (about 2 s), which every process that imports the registry
    # (every model family registers at import) would pay to build no ResNet
    from torchvision.models.resnet import BasicBlock, ResNet
    if depth is not None:
        layers = [depth] * 4 if isinstance(depth, int) else list(depth)
    model = ResNet(BasicBlock, layers, num_classes=num_classes)
    model.conv1 = nn.Conv2d(channels, 64, 3, stride=max(image_size // GRID_SIDE, 1), padding=1, bias=False)
    nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")  # as torchvision inits it
    model.maxpool = nn.Identity()
    model.fc = nn.Sequential(nn.Dropout(dropout), model.fc)
    return model


@register_model(paper="cxv", label="ResNet-18")
def resnet18_cifar(*, image_size, num_classes, channels, **config):
    """ResNet-18: BasicBlock stages [2, 2, 2, 2], CIFAR stem."""
    return resnet_cifar([2, 2, 2, 2], image_size=image_size, num_classes=num_classes, channels=channels, **config)


@register_model(paper="cxv", label="ResNet-34")
def resnet34_cifar(*, image_size, num_classes, channels, **config):
    """ResNet-34: BasicBlock stages [3, 4, 6, 3], CIFAR stem."""
    return resnet_cifar([3, 4, 6, 3], image_size=image_size, num_classes=num_classes, channels=channels, **config)
