//! DLPack both ways: [`DlpackArray`] exports a buffer of the vector env (host or CUDA device memory) as a
//! `__dlpack__` capsule that PyTorch, CuPy, JAX or numpy take without a copy, and [`device_actions`]
//! reads a CUDA array handed over by any DLPack producer (a `torch.Tensor` on the GPU) as the env's actions.
//!
//! The structs follow `dlpack.h` (v1.1): the legacy `DLManagedTensor` ("dltensor" capsules) and the
//! versioned `DLManagedTensorVersioned` ("dltensor_versioned", when the consumer passes `max_version >=
//! (1, 0)`).

use std::ffi::{CStr, c_void};
use std::ptr;

use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyTuple};

/// `kDLCPU`.
pub const DEVICE_CPU: i32 = 1;
/// `kDLCUDA`.
pub const DEVICE_CUDA: i32 = 2;
/// `kDLInt`, `kDLUInt`, `kDLFloat`, `kDLBool`.
const INT: u8 = 0;
const UINT: u8 = 1;
const FLOAT: u8 = 2;
const BOOL: u8 = 6;

const LEGACY: &CStr = c"dltensor";
const VERSIONED: &CStr = c"dltensor_versioned";
const USED_LEGACY: &CStr = c"used_dltensor";

#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
#[derive(Debug)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
#[derive(Debug)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

#[repr(C)]
#[derive(Debug)]
struct DlManagedTensorVersioned {
    version: [u32; 2],
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DlTensor,
}

/// The element type of an exported buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Element {
    F32,
    F64,
    Bool,
}

impl Element {
    fn dtype(self) -> DlDataType {
        let (code, bits) = match self {
            Self::F32 => (FLOAT, 32),
            Self::F64 => (FLOAT, 64),
            Self::Bool => (BOOL, 8),
        };
        DlDataType { code, bits, lanes: 1 }
    }

    fn name(self) -> &'static str {
        match self {
            Self::F32 => "float32",
            Self::F64 => "float64",
            Self::Bool => "bool",
        }
    }
}

/// A buffer of the vector env exported through DLPack: `__dlpack__` hands out capsules that keep the env
/// alive; the memory is the env's own, overwritten in place by each step (a tensor made from it sees every
/// step's values without another export).
#[pyclass(frozen, module = "tradesim._native", name = "DLPackArray")]
#[derive(Debug)]
pub struct DlpackArray {
    owner: Py<PyAny>,
    data: u64,
    shape: Vec<i64>,
    element: Element,
    device: (i32, i32),
}

impl DlpackArray {
    /// `shape` elements of `element` at `data` on `device` (`(kDLCPU, 0)` or `(kDLCUDA, ordinal)`), kept
    /// alive by `owner`.
    pub fn new(owner: Py<PyAny>, data: u64, shape: Vec<i64>, element: Element, device: (i32, i32)) -> Self {
        Self { owner, data, shape, element, device }
    }
}

/// The owner of an exported tensor: its shape and the Python object that keeps the memory alive.
struct Context {
    shape: Vec<i64>,
    /// Held (never read) so that the env outlives the tensor.
    _owner: Py<PyAny>,
}

/// The two managed-tensor layouts, as far as deleting them goes.
trait Managed: Sized {
    /// The [`Context`] of a tensor made by `__dlpack__`.
    fn context(&self) -> *mut c_void;
    /// The producer's deleter.
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)>;
}

impl Managed for DlManagedTensor {
    fn context(&self) -> *mut c_void {
        self.manager_ctx
    }

    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
}

impl Managed for DlManagedTensorVersioned {
    fn context(&self) -> *mut c_void {
        self.manager_ctx
    }

    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
}

/// Frees a tensor made by `__dlpack__` and its context, dropping the owner with the GIL held.
///
/// # Safety
/// `managed` and its context were made by `Box::into_raw` in `__dlpack__`; called once.
unsafe fn free<T: Managed>(managed: *mut T) {
    if managed.is_null() {
        return;
    }
    // SAFETY: as the caller guarantees.
    let (managed, ctx) = unsafe {
        let managed = Box::from_raw(managed);
        let ctx = Box::from_raw(managed.context().cast::<Context>());
        (managed, ctx)
    };
    Python::attach(|_| drop(ctx));
    drop(managed);
}

/// The deleter of exported legacy tensors.
unsafe extern "C" fn delete_legacy(managed: *mut DlManagedTensor) {
    // SAFETY: called once by the consumer or the capsule destructor, on a tensor of `__dlpack__`.
    unsafe { free(managed) }
}

/// The deleter of exported versioned tensors.
unsafe extern "C" fn delete_versioned(managed: *mut DlManagedTensorVersioned) {
    // SAFETY: as `delete_legacy`.
    unsafe { free(managed) }
}

/// Calls the deleter of the tensor in `capsule` if it is still named `name` (nobody consumed it).
///
/// # Safety
/// `capsule` is alive; a capsule of that name holds a `T`.
unsafe fn delete_unconsumed<T: Managed>(capsule: *mut ffi::PyObject, name: &CStr) {
    // SAFETY: as the caller guarantees.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, name.as_ptr()) == 1 {
            let managed = ffi::PyCapsule_GetPointer(capsule, name.as_ptr()).cast::<T>();
            if let Some(deleter) = (*managed).deleter() {
                deleter(managed);
            }
        }
    }
}

/// The capsule destructor: a capsule nobody consumed (still named "dltensor"/"dltensor_versioned") deletes
/// its tensor; a consumed one was renamed and its consumer calls the deleter.
unsafe extern "C" fn capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: the capsule is alive while its destructor runs; each name holds its layout.
    unsafe {
        delete_unconsumed::<DlManagedTensor>(capsule, LEGACY);
        delete_unconsumed::<DlManagedTensorVersioned>(capsule, VERSIONED);
    }
}

#[pymethods]
impl DlpackArray {
    /// A DLPack capsule of this buffer (no copy). `stream`: the consumer's CUDA stream; the env's steps
    /// have finished when they return, so the data is ready on any stream. `max_version >= (1, 0)` gets a
    /// versioned capsule. `dl_device` other than this buffer's and `copy=True` are refused.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = stream;
        if let Some(d) = dl_device.filter(|d| *d != self.device) {
            return Err(PyBufferError::new_err(format!(
                "this array lives on DLPack device {:?}, not {d:?} (tradesim exports without copies)",
                self.device
            )));
        }
        if copy == Some(true) {
            return Err(PyBufferError::new_err("tradesim exports its buffers without copies (copy=True refused)"));
        }
        let ctx = Box::into_raw(Box::new(Context { shape: self.shape.clone(), _owner: self.owner.clone_ref(py) }));
        // SAFETY: `ctx` was just made; its shape lives until the deleter frees it.
        let shape = unsafe { (*ctx).shape.as_mut_ptr() };
        let tensor = DlTensor {
            data: self.data as *mut c_void,
            device: DlDevice { device_type: self.device.0, device_id: self.device.1 },
            ndim: self.shape.len() as i32,
            dtype: self.element.dtype(),
            shape,
            strides: ptr::null_mut(),
            byte_offset: 0,
        };
        let versioned = max_version.is_some_and(|(major, _)| major >= 1);
        let (pointer, name) = if versioned {
            let managed = DlManagedTensorVersioned {
                version: [1, 1],
                manager_ctx: ctx.cast(),
                deleter: Some(delete_versioned),
                flags: 0,
                dl_tensor: tensor,
            };
            (Box::into_raw(Box::new(managed)).cast::<c_void>(), VERSIONED)
        } else {
            let managed = DlManagedTensor { dl_tensor: tensor, manager_ctx: ctx.cast(), deleter: Some(delete_legacy) };
            (Box::into_raw(Box::new(managed)).cast::<c_void>(), LEGACY)
        };
        // SAFETY: `pointer` is a live managed tensor; the name is static; on failure the tensor is deleted.
        unsafe {
            let capsule = ffi::PyCapsule_New(pointer, name.as_ptr(), Some(capsule_destructor));
            if capsule.is_null() {
                if versioned {
                    delete_versioned(pointer.cast());
                } else {
                    delete_legacy(pointer.cast());
                }
                return Err(PyErr::fetch(py));
            }
            Ok(Bound::from_owned_ptr(py, capsule))
        }
    }

    /// `(device type, device id)`: `(1, 0)` for host memory, `(2, ordinal)` for CUDA.
    fn __dlpack_device__(&self) -> (i32, i32) {
        self.device
    }

    /// The shape.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }

    /// The element type (`float32`, `float64` or `bool`).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.element.name()
    }

    /// The buffer's address (host or device).
    #[getter]
    fn address(&self) -> u64 {
        self.data
    }

    fn __repr__(&self) -> String {
        let device = if self.device.0 == DEVICE_CUDA { format!("cuda:{}", self.device.1) } else { "cpu".to_owned() };
        format!("DLPackArray(shape={:?}, dtype={}, device={device})", self.shape, self.element.name())
    }
}

/// Actions handed over through DLPack: a device address, the integer type, and the capsule's tensor to
/// release once the step has run.
pub struct DeviceActions {
    /// The first element's device address.
    pub address: u64,
    /// Bits per element.
    pub bits: u32,
    /// Signed integers.
    pub signed: bool,
    managed: *mut DlManagedTensor,
}

impl Drop for DeviceActions {
    fn drop(&mut self) {
        // SAFETY: the consumer (us) calls the producer's deleter once, when done with the memory.
        unsafe {
            if let Some(deleter) = (*self.managed).deleter {
                deleter(self.managed);
            }
        }
    }
}

/// The DLPack device of `obj` when it has one.
pub fn dlpack_device(obj: &Bound<'_, PyAny>) -> PyResult<Option<(i32, i32)>> {
    if !obj.hasattr("__dlpack_device__")? {
        return Ok(None);
    }
    Ok(Some(obj.call_method0("__dlpack_device__")?.extract()?))
}

/// Takes `obj`'s DLPack tensor (CUDA device `ordinal`, asking the producer to order its writes before
/// `stream`) as `n` actions: one dimension of `n` contiguous integers.
pub fn device_actions(obj: &Bound<'_, PyAny>, ordinal: i32, stream: u64, n: usize) -> PyResult<DeviceActions> {
    let py = obj.py();
    let kwargs = [("stream", stream)].into_py_dict(py)?;
    let capsule = obj.call_method("__dlpack__", (), Some(&kwargs))?;
    // SAFETY: a capsule named "dltensor" holds a DLManagedTensor (the DLPack protocol); renaming it marks it
    // consumed, so its destructor leaves the tensor to our deleter call (DeviceActions::drop).
    let managed = unsafe {
        let p = ffi::PyCapsule_GetPointer(capsule.as_ptr(), LEGACY.as_ptr()).cast::<DlManagedTensor>();
        if p.is_null() {
            return Err(PyErr::take(py).unwrap_or_else(|| PyTypeError::new_err("actions: not a DLPack capsule")));
        }
        if ffi::PyCapsule_SetName(capsule.as_ptr(), USED_LEGACY.as_ptr()) != 0 {
            return Err(PyErr::fetch(py));
        }
        p
    };
    // SAFETY: the managed tensor stays valid until its deleter runs (when `actions` drops).
    let t = unsafe { &(*managed).dl_tensor };
    let mut actions = DeviceActions { address: t.data as u64 + t.byte_offset, bits: 0, signed: false, managed };
    let device = (t.device.device_type, t.device.device_id);
    if device != (DEVICE_CUDA, ordinal) {
        return Err(PyValueError::new_err(format!(
            "actions: on DLPack device {device:?}, this env runs on cuda:{ordinal}"
        )));
    }
    // SAFETY: `shape` (and `strides` when not null) hold `ndim` elements (DLPack).
    let (shape, stride) = unsafe {
        let nd = usize::try_from(t.ndim).unwrap_or(0);
        let shape = if nd == 0 { Vec::new() } else { std::slice::from_raw_parts(t.shape, nd).to_vec() };
        let stride = if t.strides.is_null() || nd != 1 { 1 } else { *t.strides };
        (shape, stride)
    };
    if shape != [n as i64] || stride != 1 {
        return Err(PyValueError::new_err(format!(
            "actions: shape {shape:?} (stride {stride}), expected one contiguous dimension of {n} envs"
        )));
    }
    let signed = match t.dtype.code {
        INT => true,
        UINT => false,
        code => {
            return Err(PyTypeError::new_err(format!(
                "actions: integer codes 0 (flat), 1 (long), 2 (short); got DLPack type code {code} ({} bits)",
                t.dtype.bits
            )));
        }
    };
    if t.dtype.lanes != 1 || !matches!(t.dtype.bits, 8 | 16 | 32 | 64) {
        return Err(PyTypeError::new_err(format!("actions: {}-bit integers x{} lanes", t.dtype.bits, t.dtype.lanes)));
    }
    actions.bits = u32::from(t.dtype.bits);
    actions.signed = signed;
    Ok(actions)
}
