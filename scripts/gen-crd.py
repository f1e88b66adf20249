#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the ClusterPolicy CRD (clusterpolicies.nvidia.com) of the Helm chart.

The schema is built here from a few shapes (a component, an env list, resources, tolerations) so
that the many operand sections stay alike; the YAML under deploy/helm/gpuplane/crds/ is this
script's output and a test fails when the two differ. Run `scripts/gen-crd.py` (or
scripts/render-deploy.sh, which calls it) after changing it.

What is typed: every field gpuplane reads (docs/operator.md) and the fields NVIDIA's CRD types for
the operands gpuplane accepts and ignores. `spec` and every section keep unknown fields
(x-kubernetes-preserve-unknown-fields), so a ClusterPolicy written for a newer NVIDIA release is
stored whole. The schema is structural, as apiextensions.k8s.io/v1 requires: every node has a type
(int-or-string quantities excepted), arrays have items, no value-validation keyword carries a type.

Usage: gen-crd.py [--check] [OUTPUT]   (default OUTPUT: deploy/helm/gpuplane/crds/nvidia.com_clusterpolicies.yaml)
  --check  compare instead of writing; exit 1 when OUTPUT is not what this script writes.
"""
import pathlib
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "deploy" / "helm" / "gpuplane" / "crds" / "nvidia.com_clusterpolicies.yaml"

QUANTITY = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
            r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")


# -- shapes -------------------------------------------------------------------------------------

def string(desc, enum=None, default=None):
    s = {"description": desc, "type": "string"}
    if enum is not None:
        s["enum"] = list(enum)
    if default is not None:
        s["default"] = default
    return s


def boolean(desc, default=None):
    s = {"description": desc, "type": "boolean"}
    if default is not None:
        s["default"] = default
    return s


def integer(desc, fmt="int32", minimum=None, default=None):
    s = {"description": desc, "type": "integer", "format": fmt}
    if minimum is not None:
        s["minimum"] = minimum
    if default is not None:
        s["default"] = default
    return s


def obj(desc, props=None, required=None, preserve=False):
    s = {"description": desc, "type": "object"}
    if props:
        s["properties"] = dict(sorted(props.items()))
    if required:
        s["required"] = list(required)
    if preserve:
        s["x-kubernetes-preserve-unknown-fields"] = True
    return s


def string_map(desc):
    return {"description": desc, "type": "object", "additionalProperties": {"type": "string"}}


def array(desc, items):
    return {"description": desc, "type": "array", "items": items}


def strings(desc):
    return array(desc, {"type": "string"})


def env_list(desc="Environment variables: a name already set by gpuplane is overridden, others are appended."):
    return array(desc, obj("An environment variable.", {
        "name": string("Name of the variable."),
        "value": string("Value of the variable."),
    }, required=["name"]))


def quantity_map(desc):
    return {
        "description": desc,
        "type": "object",
        "additionalProperties": {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY,
            "x-kubernetes-int-or-string": True,
        },
    }


def resources():
    return obj("Compute resources of the operand's main container; replaces the rendered ones.", {
        "limits": quantity_map("Maximum amount of compute resources allowed."),
        "requests": quantity_map("Minimum amount of compute resources required."),
    })


def tolerations(desc):
    return array(desc, obj("A toleration of a node taint.", {
        "effect": string("Taint effect to match: NoSchedule, PreferNoSchedule or NoExecute; empty matches all."),
        "key": string("Taint key; empty with operator Exists matches every taint."),
        "operator": string("Exists or Equal (the default)."),
        "tolerationSeconds": integer("How long a NoExecute taint is tolerated.", fmt="int64"),
        "value": string("Taint value to match with operator Equal."),
    }))


def probe(desc):
    return obj(desc, {
        "failureThreshold": integer("Consecutive failures before the probe fails.", minimum=1),
        "initialDelaySeconds": integer("Seconds after start before the first probe.", minimum=0),
        "periodSeconds": integer("Seconds between probes.", minimum=1),
        "successThreshold": integer("Consecutive successes before the probe succeeds.", minimum=1),
        "timeoutSeconds": integer("Seconds after which the probe times out.", minimum=1),
    })


def image_fields(what):
    return {
        "repository": string(f"Registry path of the {what} image (the image is repository/image:version)."),
        "image": string(f"Name of the {what} image; taken verbatim when repository and version are unset."),
        "version": string(f"Tag of the {what} image, or a digest (sha256:...) giving repository/image@digest."),
        "imagePullPolicy": string("Image pull policy.", enum=["Always", "Never", "IfNotPresent"]),
        "imagePullSecrets": strings("Names of Secrets in the operator namespace used to pull the image."),
    }


def component(what, desc, extra=None):
    """An operand section: enabled, the image fields, args, env, resources, hostNetwork."""
    props = image_fields(what)
    props.update({
        "enabled": boolean(f"Whether the {what} is deployed."),
        "args": strings("Arguments of the main container; non-empty replaces the rendered ones."),
        "env": env_list(),
        "resources": resources(),
        "hostNetwork": boolean("Run the pods in the host's network namespace."),
    })
    props.update(extra or {})
    return obj(desc, props, preserve=True)


def config_ref(desc, default_desc):
    return obj(desc, {
        "name": string("Name of a ConfigMap in the operator namespace."),
        "default": string(default_desc),
    })


def validator_check(check):
    return obj(f"The {check} check of the validator.", {"env": env_list(f"Environment of the {check} check.")},
               preserve=True)


# -- the spec -----------------------------------------------------------------------------------

def spec_schema():
    ignored = "Accepted for compatibility with NVIDIA's ClusterPolicy; gpuplane does not deploy it."
    props = {
        "operator": obj("Settings of the operator itself.", {
            "runtimeClass": string("Name and handler of the RuntimeClass created for the operands.",
                                   default="nvidia"),
            "defaultRuntime": string("Deprecated and ignored: the container runtime is detected."),
            "use_ocp_driver_toolkit": boolean("OpenShift only; ignored by gpuplane."),
            "labels": string_map("Ignored (NVIDIA's CRD has it)."),
            "annotations": string_map("Ignored (NVIDIA's CRD has it)."),
            "initContainer": obj("Deprecated and ignored.", image_fields("init container"), preserve=True),
            "metrics": obj("Metrics of the operator.", preserve=True),
        }, preserve=True),
        "daemonsets": obj("Settings applied to every operand DaemonSet.", {
            "labels": string_map("Labels added to every DaemonSet and its pods."),
            "annotations": string_map("Annotations added to every DaemonSet and its pods."),
            "tolerations": tolerations("Tolerations of every operand pod; non-empty replaces the default "
                                       "(nvidia.com/gpu NoSchedule)."),
            "priorityClassName": string("Priority class of the operand pods (default system-node-critical)."),
            "updateStrategy": string("Update strategy of the operand DaemonSets.",
                                     enum=["RollingUpdate", "OnDelete"], default="RollingUpdate"),
            "rollingUpdate": obj("Rolling update settings.", {
                "maxUnavailable": string("Pods that may be unavailable during an update: a number (\"1\") "
                                         "or a percentage (\"25%\")."),
            }),
            "podSecurityContext": obj("Pod security context of every operand pod.", {
                "fsGroup": integer("Group owning the pod's volumes.", fmt="int64"),
                "runAsGroup": integer("Group ID of the containers' processes.", fmt="int64"),
                "runAsNonRoot": boolean("Refuse to start containers running as UID 0."),
                "runAsUser": integer("User ID of the containers' processes.", fmt="int64"),
                "seccompProfile": obj("Seccomp profile of the containers.", {
                    "localhostProfile": string("Profile file on the node, for type Localhost."),
                    "type": string("RuntimeDefault, Unconfined or Localhost."),
                }, required=["type"]),
                "supplementalGroups": array("Extra groups of the containers' processes.",
                                            {"type": "integer", "format": "int64"}),
            }, preserve=True),
        }, preserve=True),
        "driver": component("driver", "The NVIDIA driver container (NVIDIA's image).", {
            "usePrecompiled": boolean("Use precompiled driver packages (image tag per kernel)."),
            "useNvidiaDriverCRD": boolean("Leave the driver to NVIDIADriver objects (the driver state is off)."),
            "useOpenKernelModules": boolean("Deprecated: use kernelModuleType."),
            "kernelModuleType": string("Kernel module flavour.", enum=["auto", "open", "proprietary"],
                                       default="auto"),
            "startupProbe": probe("Startup probe of the driver container."),
            "livenessProbe": probe("Liveness probe of the driver container."),
            "readinessProbe": probe("Readiness probe of the driver container."),
            "rdma": obj("GPUDirect RDMA.", {
                "enabled": boolean("Load nvidia-peermem."),
                "useHostMofed": boolean("MOFED is installed on the host."),
            }),
            "upgradePolicy": obj("Driver upgrade policy (NVIDIA's upgrade controller; not run by gpuplane).", {
                "autoUpgrade": boolean("Upgrade the driver automatically.", default=False),
                "maxParallelUpgrades": integer("Nodes upgraded in parallel (0: no limit).", minimum=0),
                "maxUnavailable": {"description": "Nodes that may be unavailable, a number or a percentage.",
                                   "anyOf": [{"type": "integer"}, {"type": "string"}],
                                   "x-kubernetes-int-or-string": True},
            }, preserve=True),
            "manager": obj("The k8s-driver-manager init container.", dict(image_fields("driver manager"),
                                                                          env=env_list()), preserve=True),
            "repoConfig": obj("Package repository configuration.", {
                "configMapName": string("ConfigMap with the repository files."),
            }),
            "certConfig": obj("Custom certificates.", {"name": string("ConfigMap with the certificates.")}),
            "licensingConfig": obj("vGPU licensing.", {
                "configMapName": string("ConfigMap with the licensing configuration (deprecated)."),
                "secretName": string("Secret with the licensing configuration."),
                "nlsEnabled": boolean("Use the NVIDIA License System."),
            }),
            "virtualTopology": obj("vGPU topology.", {"config": string("ConfigMap with the topology config.")}),
            "kernelModuleConfig": obj("Kernel module parameters.", {
                "name": string("ConfigMap with the module parameters."),
            }),
            "secretEnv": string("Secret whose keys become environment variables of the driver container."),
        }),
        "toolkit": component("container toolkit", "The NVIDIA container toolkit (NVIDIA's image).", {
            "installDir": string("Host directory the toolkit is installed into.", default="/usr/local/nvidia"),
        }),
        "validator": component("validator", "The validator (gpuplane validate).", {
            "driver": validator_check("driver"),
            "toolkit": validator_check("toolkit"),
            "cuda": validator_check("cuda"),
            "plugin": validator_check("plugin"),
            "vfioPCI": validator_check("vfio-pci"),
            "vgpuManager": validator_check("vgpu-manager"),
            "vgpuDevices": validator_check("vgpu-devices"),
        }),
        "devicePlugin": component("device plugin", "The device plugin (gpuplane device-plugin).", {
            "config": config_ref("Device plugin configuration files, shared with GPU feature discovery.",
                                 "Key of the ConfigMap used when the node has no nvidia.com/device-plugin.config "
                                 "label."),
            "mps": obj("MPS.", {"root": string("Host directory of the MPS control daemon.",
                                               default="/run/nvidia/mps")}),
        }),
        "draDriver": component("DRA driver", "The DRA kubelet plugin (gpuplane dra-driver); gpuplane's own "
                               "section, disabled unless enabled is true. Nodes running it get no device "
                               "plugin."),
        "dcgmExporter": component("DCGM exporter", "The metrics exporter (gpuplane exporter).", {
            "config": obj("Metrics to collect.", {
                "name": string("ConfigMap holding the counters CSV under the key dcgm-metrics.csv."),
            }),
            "annotations": string_map("Annotations of the exporter pods."),
            "hostPID": boolean("Run the exporter in the host's PID namespace."),
            "enablePodLabels": boolean("Add the labels of the pods using a GPU to its series."),
            "enablePodUID": boolean("Add the UID of the pod using a GPU to its series."),
            "podLabelAllowlistRegex": strings("Regular expressions selecting the pod labels added."),
            "hpcJobMapping": obj("HPC job mapping.", {
                "enabled": boolean("Read job mapping files."),
                "directory": string("Directory of the job mapping files."),
            }),
            "service": obj("The exporter's Service.", {
                "type": string("Service type (default ClusterIP)."),
                "internalTrafficPolicy": string("Cluster or Local."),
            }),
            "serviceMonitor": obj("A ServiceMonitor for the exporter (NVIDIA's; not created by gpuplane).", {
                "enabled": boolean("Create a ServiceMonitor."),
                "interval": string("Scrape interval."),
                "scrapeTimeout": string("Scrape timeout."),
                "honorLabels": boolean("Keep the exporter's labels on conflicts."),
                "additionalLabels": string_map("Labels of the ServiceMonitor."),
                "relabelings": array("Relabelings of the endpoint.", obj("A relabeling.", preserve=True)),
            }, preserve=True),
        }),
        "gfd": component("GPU feature discovery", "GPU feature discovery (gpuplane discover)."),
        "mig": obj("MIG settings.", {
            "strategy": string("How MIG devices are exposed.", enum=["none", "single", "mixed"]),
        }),
        "psa": obj("Pod Security Admission.", {
            "enabled": boolean("Label the operator namespace privileged for enforce, audit and warn."),
        }),
        "psp": obj("Deprecated and ignored.", {"enabled": boolean("Ignored.")}),
        "cdi": obj("Container Device Interface.", {
            "enabled": boolean("Hand devices to containers through CDI.", default=True),
            "default": boolean("Deprecated and ignored.", default=False),
            "nriPluginEnabled": boolean("Use the NRI plugin (NVIDIA's; not deployed by gpuplane).",
                                        default=False),
        }),
        "hostPaths": obj("Host directories.", {
            "rootFS": string("The host's root filesystem (default /)."),
            "driverInstallDir": string("Where the driver container installs the driver (default "
                                       "/run/nvidia/driver)."),
            "kubeletRootDir": string("The kubelet's root directory (default /var/lib/kubelet)."),
        }),
        "sandboxWorkloads": obj("Sandboxed (VM) workloads; gpuplane deploys none of their operands.", {
            "enabled": boolean("Enable sandboxed workloads."),
            "defaultWorkload": string("Workload of nodes without nvidia.com/gpu.workload.config.",
                                      enum=["container", "vm-passthrough", "vm-vgpu"], default="container"),
            "mode": string("Sandbox mode.", enum=["kubevirt", "kata"], default="kubevirt"),
        }),
        "dcgm": component("DCGM host engine", ignored, {
            "hostPort": integer("Host port of nv-hostengine."),
        }),
        "migManager": component("MIG manager", ignored, {
            "config": config_ref("MIG configurations.", "Configuration applied by default."),
            "gpuClientsConfig": obj("GPU clients.", {"name": string("ConfigMap of GPU clients.")}),
        }),
        "nodeStatusExporter": component("node status exporter", ignored),
        "gds": component("GPUDirect Storage driver", ignored),
        "gdrcopy": component("GDRCopy driver", ignored),
        "vgpuManager": component("vGPU manager", ignored),
        "vgpuDeviceManager": component("vGPU device manager", ignored),
        "vfioManager": component("VFIO manager", ignored),
        "sandboxDevicePlugin": component("sandbox device plugin", ignored),
        "kataSandboxDevicePlugin": component("Kata sandbox device plugin", ignored),
        "kataManager": component("Kata manager", "Deprecated; never deployed."),
        "ccManager": component("confidential computing manager", ignored, {
            "defaultMode": string("Default confidential computing mode.", enum=["on", "off", "devtools"]),
        }),
    }
    return obj("The desired state of the GPU stack. Sections left out take NVIDIA's defaults.", props,
               preserve=True)


def status_schema():
    condition = obj("A condition (metav1.Condition).", {
        "type": {"description": "Type of the condition (Ready, Error).", "type": "string", "maxLength": 316,
                 "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                            r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"},
        "status": string("True, False or Unknown.", enum=["True", "False", "Unknown"]),
        "observedGeneration": integer("The metadata.generation the condition was computed from.", fmt="int64",
                                      minimum=0),
        "lastTransitionTime": {"description": "When the status last changed.", "type": "string",
                               "format": "date-time"},
        "reason": {"description": "Why, in CamelCase.", "type": "string", "minLength": 1, "maxLength": 1024,
                   "pattern": r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"},
        "message": {"description": "Details for people.", "type": "string", "maxLength": 32768},
    }, required=["type", "status", "lastTransitionTime", "reason", "message"])
    conditions = array("The Ready and Error conditions.", condition)
    conditions["x-kubernetes-list-type"] = "map"
    conditions["x-kubernetes-list-map-keys"] = ["type"]
    return obj("The observed state, written by the operator.", {
        "state": string("ready when every enabled state is ready; notReady otherwise; ignored for every "
                        "ClusterPolicy but the oldest.", enum=["ignored", "ready", "notReady", "disabled"]),
        "namespace": string("Namespace of the operator and its operands."),
        "conditions": conditions,
    }, required=["state"])


def crd():
    schema = obj("ClusterPolicy: how the operator deploys the GPU stack on the cluster's GPU nodes.", {
        "apiVersion": string("Versioned schema of this representation of an object."),
        "kind": string("REST resource this object represents."),
        "metadata": {"type": "object"},
        "spec": spec_schema(),
        "status": status_schema(),
    })
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": "clusterpolicies.nvidia.com",
            "labels": {"app.kubernetes.io/part-of": "gpu-operator"},
        },
        "spec": {
            "group": "nvidia.com",
            "names": {
                "kind": "ClusterPolicy",
                "listKind": "ClusterPolicyList",
                "plural": "clusterpolicies",
                "singular": "clusterpolicy",
            },
            "scope": "Cluster",
            "versions": [{
                "name": "v1",
                "served": True,
                "storage": True,
                "additionalPrinterColumns": [
                    {"name": "Status", "type": "string", "jsonPath": ".status.state"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": schema},
            }],
        },
    }


class Dumper(yaml.SafeDumper):
    """Block style; multi-line strings as literal blocks; lists indented under their key."""

    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)


def _str(dumper, data):
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


Dumper.add_representer(str, _str)


def render():
    head = ("# SPDX-License-Identifier: Apache-2.0\n"
            "# The ClusterPolicy CRD (nvidia.com/v1), the same API as NVIDIA's GPU Operator.\n"
            "# Generated by scripts/gen-crd.py: edit that script, not this file.\n")
    return head + yaml.dump(crd(), Dumper=Dumper, sort_keys=False, width=100,
                                      default_flow_style=False)


def main(argv):
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    out = pathlib.Path(args[0]) if args else DEFAULT_OUT
    text = render()
    if check:
        if not out.exists() or out.read_text() != text:
            print(f"{out} is not what scripts/gen-crd.py writes: run scripts/gen-crd.py", file=sys.stderr)
            return 1
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
