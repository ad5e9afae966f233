-- Optuna 5.0.0's schema on PostgreSQL (schema version 12), as `pg_dump -s` printed it for a study that optuna
-- itself created; tradesim runs it once in an empty database (src/hyperopt/db.rs).
CREATE TYPE public.studydirection AS ENUM (
    'NOT_SET',
    'MINIMIZE',
    'MAXIMIZE'
);
CREATE TYPE public.trialintermediatevaluetype AS ENUM (
    'FINITE',
    'INF_POS',
    'INF_NEG',
    'NAN'
);
CREATE TYPE public.trialstate AS ENUM (
    'RUNNING',
    'COMPLETE',
    'PRUNED',
    'FAIL',
    'WAITING'
);
CREATE TYPE public.trialvaluetype AS ENUM (
    'FINITE',
    'INF_POS',
    'INF_NEG'
);
CREATE TABLE public.alembic_version (
    version_num character varying(32) NOT NULL
);
CREATE TABLE public.studies (
    study_id integer NOT NULL,
    study_name character varying(512) NOT NULL
);
CREATE SEQUENCE public.studies_study_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE public.studies_study_id_seq OWNED BY public.studies.study_id;
CREATE TABLE public.study_directions (
    study_direction_id integer NOT NULL,
    direction public.studydirection NOT NULL,
    study_id integer NOT NULL,
    objective integer NOT NULL
);
CREATE SEQUENCE public.study_directions_study_direction_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE public.study_directions_study_direction_id_seq OWNED BY public.study_directions.study_direction_id;
CREATE TABLE public.study_system_attributes (
    study_system_attribute_id integer NOT NULL,
    study_id integer,
    key character varying(512),
    value_json text
);
CREATE SEQUENCE public.study_system_attributes_study_system_attribute_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE public.study_system_attributes_study_system_attribute_id_seq OWNED BY public.study_system_attributes.study_system_attribute_id;
CREATE TABLE public.study_user_attributes (
    study_user_attribute_id integer NOT NULL,
    study_id integer,
    key character varying(512),
    value_json text
);
CREATE SEQUENCE public.study_user_attributes_study_user_attribute_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE public.study_user_attributes_study_user_attribute_id_seq OWNED BY public.study_user_attributes.study_user_attribute_id;
CREATE TABLE public.trial_heartbeats (
    trial_heartbeat_id integer NOT NULL,
    trial_id integer NOT NULL,
    heartbeat timestamp without time zone NOT NULL
);
CREATE SEQUENCE public.trial_heartbeats_trial_heartbeat_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE public.trial_heartbeats_trial_heartbeat_id_seq OWNED BY public.trial_heartbeats.trial_heartbeat_id;
CREATE TABLE public.trial_intermediate_values (
    trial_intermediate_value_id integer NOT NULL,
    trial_id integer NOT NULL,
    step integer NOT NULL,
    intermediate_value double precision,
    intermediate_value_type public.trialintermediatevaluetype NOT NULL
);
CREATE SEQUENCE public.trial_intermediate_values_trial_intermediate_value_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE public.trial_intermediate_values_trial_intermediate_value_id_seq OWNED BY public.trial_intermediate_values.trial_intermediate_value_id;
CREATE TABLE public.trial_params (
    param_id integer NOT NULL,
    trial_id integer,
    param_name character varying(512),
    param_value double precision,
    distribution_json text
);
CREATE SEQUENCE public.trial_params_param_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE public.trial_params_param_id_seq OWNED BY public.trial_params.param_id;
CREATE TABLE public.trial_system_attributes (
    trial_system_attribute_id integer NOT NULL,
    trial_id integer,
    key character varying(512),
    value_json text
);
CREATE SEQUENCE public.trial_system_attributes_trial_system_attribute_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE public.trial_system_attributes_trial_system_attribute_id_seq OWNED BY public.trial_system_attributes.trial_system_attribute_id;
CREATE TABLE public.trial_user_attributes (
    trial_user_attribute_id integer NOT NULL,
    trial_id integer,
    key character varying(512),
    value_json text
);
CREATE SEQUENCE public.trial_user_attributes_trial_user_attribute_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE public.trial_user_attributes_trial_user_attribute_id_seq OWNED BY public.trial_user_attributes.trial_user_attribute_id;
CREATE TABLE public.trial_values (
    trial_value_id integer NOT NULL,
    trial_id integer NOT NULL,
    objective integer NOT NULL,
    value double precision,
    value_type public.trialvaluetype NOT NULL
);
CREATE SEQUENCE public.trial_values_trial_value_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE public.trial_values_trial_value_id_seq OWNED BY public.trial_values.trial_value_id;
CREATE TABLE public.trials (
    trial_id integer NOT NULL,
    number integer,
    study_id integer,
    state public.trialstate NOT NULL,
    datetime_start timestamp without time zone,
    datetime_complete timestamp without time zone
);
CREATE SEQUENCE public.trials_trial_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE public.trials_trial_id_seq OWNED BY public.trials.trial_id;
CREATE TABLE public.version_info (
    version_info_id integer NOT NULL,
    schema_version integer,
    library_version character varying(256),
    CONSTRAINT version_info_version_info_id_check CHECK ((version_info_id = 1))
);
ALTER TABLE ONLY public.studies ALTER COLUMN study_id SET DEFAULT nextval('public.studies_study_id_seq'::regclass);
ALTER TABLE ONLY public.study_directions ALTER COLUMN study_direction_id SET DEFAULT nextval('public.study_directions_study_direction_id_seq'::regclass);
ALTER TABLE ONLY public.study_system_attributes ALTER COLUMN study_system_attribute_id SET DEFAULT nextval('public.study_system_attributes_study_system_attribute_id_seq'::regclass);
ALTER TABLE ONLY public.study_user_attributes ALTER COLUMN study_user_attribute_id SET DEFAULT nextval('public.study_user_attributes_study_user_attribute_id_seq'::regclass);
ALTER TABLE ONLY public.trial_heartbeats ALTER COLUMN trial_heartbeat_id SET DEFAULT nextval('public.trial_heartbeats_trial_heartbeat_id_seq'::regclass);
ALTER TABLE ONLY public.trial_intermediate_values ALTER COLUMN trial_intermediate_value_id SET DEFAULT nextval('public.trial_intermediate_values_trial_intermediate_value_id_seq'::regclass);
ALTER TABLE ONLY public.trial_params ALTER COLUMN param_id SET DEFAULT nextval('public.trial_params_param_id_seq'::regclass);
ALTER TABLE ONLY public.trial_system_attributes ALTER COLUMN trial_system_attribute_id SET DEFAULT nextval('public.trial_system_attributes_trial_system_attribute_id_seq'::regclass);
ALTER TABLE ONLY public.trial_user_attributes ALTER COLUMN trial_user_attribute_id SET DEFAULT nextval('public.trial_user_attributes_trial_user_attribute_id_seq'::regclass);
ALTER TABLE ONLY public.trial_values ALTER COLUMN trial_value_id SET DEFAULT nextval('public.trial_values_trial_value_id_seq'::regclass);
ALTER TABLE ONLY public.trials ALTER COLUMN trial_id SET DEFAULT nextval('public.trials_trial_id_seq'::regclass);
ALTER TABLE ONLY public.alembic_version
    ADD CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num);
ALTER TABLE ONLY public.studies
    ADD CONSTRAINT studies_pkey PRIMARY KEY (study_id);
ALTER TABLE ONLY public.study_directions
    ADD CONSTRAINT study_directions_pkey PRIMARY KEY (study_direction_id);
ALTER TABLE ONLY public.study_directions
    ADD CONSTRAINT study_directions_study_id_objective_key UNIQUE (study_id, objective);
ALTER TABLE ONLY public.study_system_attributes
    ADD CONSTRAINT study_system_attributes_pkey PRIMARY KEY (study_system_attribute_id);
ALTER TABLE ONLY public.study_system_attributes
    ADD CONSTRAINT study_system_attributes_study_id_key_key UNIQUE (study_id, key);
ALTER TABLE ONLY public.study_user_attributes
    ADD CONSTRAINT study_user_attributes_pkey PRIMARY KEY (study_user_attribute_id);
ALTER TABLE ONLY public.study_user_attributes
    ADD CONSTRAINT study_user_attributes_study_id_key_key UNIQUE (study_id, key);
ALTER TABLE ONLY public.trial_heartbeats
    ADD CONSTRAINT trial_heartbeats_pkey PRIMARY KEY (trial_heartbeat_id);
ALTER TABLE ONLY public.trial_heartbeats
    ADD CONSTRAINT trial_heartbeats_trial_id_key UNIQUE (trial_id);
ALTER TABLE ONLY public.trial_intermediate_values
    ADD CONSTRAINT trial_intermediate_values_pkey PRIMARY KEY (trial_intermediate_value_id);
ALTER TABLE ONLY public.trial_intermediate_values
    ADD CONSTRAINT trial_intermediate_values_trial_id_step_key UNIQUE (trial_id, step);
ALTER TABLE ONLY public.trial_params
    ADD CONSTRAINT trial_params_pkey PRIMARY KEY (param_id);
ALTER TABLE ONLY public.trial_params
    ADD CONSTRAINT trial_params_trial_id_param_name_key UNIQUE (trial_id, param_name);
ALTER TABLE ONLY public.trial_system_attributes
    ADD CONSTRAINT trial_system_attributes_pkey PRIMARY KEY (trial_system_attribute_id);
ALTER TABLE ONLY public.trial_system_attributes
    ADD CONSTRAINT trial_system_attributes_trial_id_key_key UNIQUE (trial_id, key);
ALTER TABLE ONLY public.trial_user_attributes
    ADD CONSTRAINT trial_user_attributes_pkey PRIMARY KEY (trial_user_attribute_id);
ALTER TABLE ONLY public.trial_user_attributes
    ADD CONSTRAINT trial_user_attributes_trial_id_key_key UNIQUE (trial_id, key);
ALTER TABLE ONLY public.trial_values
    ADD CONSTRAINT trial_values_pkey PRIMARY KEY (trial_value_id);
ALTER TABLE ONLY public.trial_values
    ADD CONSTRAINT trial_values_trial_id_objective_key UNIQUE (trial_id, objective);
ALTER TABLE ONLY public.trials
    ADD CONSTRAINT trials_pkey PRIMARY KEY (trial_id);
ALTER TABLE ONLY public.version_info
    ADD CONSTRAINT version_info_pkey PRIMARY KEY (version_info_id);
CREATE UNIQUE INDEX ix_studies_study_name ON public.studies USING btree (study_name);
CREATE INDEX ix_trials_study_id ON public.trials USING btree (study_id);
ALTER TABLE ONLY public.study_directions
    ADD CONSTRAINT study_directions_study_id_fkey FOREIGN KEY (study_id) REFERENCES public.studies(study_id);
ALTER TABLE ONLY public.study_system_attributes
    ADD CONSTRAINT study_system_attributes_study_id_fkey FOREIGN KEY (study_id) REFERENCES public.studies(study_id);
ALTER TABLE ONLY public.study_user_attributes
    ADD CONSTRAINT study_user_attributes_study_id_fkey FOREIGN KEY (study_id) REFERENCES public.studies(study_id);
ALTER TABLE ONLY public.trial_heartbeats
    ADD CONSTRAINT trial_heartbeats_trial_id_fkey FOREIGN KEY (trial_id) REFERENCES public.trials(trial_id);
ALTER TABLE ONLY public.trial_intermediate_values
    ADD CONSTRAINT trial_intermediate_values_trial_id_fkey FOREIGN KEY (trial_id) REFERENCES public.trials(trial_id);
ALTER TABLE ONLY public.trial_params
    ADD CONSTRAINT trial_params_trial_id_fkey FOREIGN KEY (trial_id) REFERENCES public.trials(trial_id);
ALTER TABLE ONLY public.trial_system_attributes
    ADD CONSTRAINT trial_system_attributes_trial_id_fkey FOREIGN KEY (trial_id) REFERENCES public.trials(trial_id);
ALTER TABLE ONLY public.trial_user_attributes
    ADD CONSTRAINT trial_user_attributes_trial_id_fkey FOREIGN KEY (trial_id) REFERENCES public.trials(trial_id);
ALTER TABLE ONLY public.trial_values
    ADD CONSTRAINT trial_values_trial_id_fkey FOREIGN KEY (trial_id) REFERENCES public.trials(trial_id);
ALTER TABLE ONLY public.trials
    ADD CONSTRAINT trials_study_id_fkey FOREIGN KEY (study_id) REFERENCES public.studies(study_id);
